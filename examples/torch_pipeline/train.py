"""Trains a small decoder-only transformer with torch.distributed.pipelining on CPU processes
(gloo on loopback), with Perseus attached in one line per rank: ``perseus.torch.attach(schedule,
server_url, gpu="sim", ...)``.

Every rank builds its stages and the schedule object (any schedule class torch has, or a
runtime schedule from a CSV), attaches Perseus and calls ``schedule.step`` as any torch
pipelining job does. With ``--pace`` the simulated GPU holds each instruction until its profiled
time at the clock in use has passed (scaled by ``--time-scale``), so the plan shows in the real
processes' timing; without it the simulated GPU keeps its own virtual time.

    .venv/bin/python examples/torch_pipeline/train.py --schedule zbv --server http://127.0.0.1:7787

The last stage's rank prints the loss of each iteration. ``--result-dir`` has every rank write
what it ran (rankN.json: the actions its hooks saw, torch's order, losses, a digest of its
parameters, wall and process CPU time per iteration, the client's state), for tests and benches.
"""

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import ModelConfig, batch  # noqa: E402
from pipeline import SCHEDULES, build, local_stages, stages_per_rank  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedule", default="1f1b", choices=[*SCHEDULES, "csv"],
                   help="torch's schedule class (by our name), or csv (--csv)")
    p.add_argument("--csv", help="a compute-only schedule in torch's notation, for --schedule csv")
    p.add_argument("--ranks", type=int, default=4, help="processes = pipeline ranks")
    p.add_argument("--stages-per-rank", type=int, default=2,
                   help="stages each rank holds in the interleaved schedules and csv (1F1B and "
                        "GPipe: 1; ZBV and DualPipeV: 2)")
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16, help="sequences per iteration")
    p.add_argument("--iterations", type=int, default=10,
                   help="training iterations (with --until-done: at most this many)")
    p.add_argument("--until-done", action="store_true",
                   help="stop once the server's schedule is final (e.g. the profiler's sweep "
                        "ended); every rank stops at the same iteration")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the model runs (cuda: rank r on GPU r, NCCL between ranks)")
    p.add_argument("--gpu", default="sim", choices=["sim", "nvml"],
                   help="Perseus's GPU: the simulated one, or the real one through NVML (with "
                        "--observe to measure without setting anything)")
    p.add_argument("--server", help="Perseus server URL (default: none, the default clock)")
    p.add_argument("--no-perseus", action="store_true", help="train without Perseus attached")
    p.add_argument("--alternate", type=int, default=0, metavar="N",
                   help="detach and attach again every N iterations (attached first), keeping "
                        "the job: an A/B of what attaching costs within the same processes")
    p.add_argument("--profile", help="the simulated GPU's profile CSV, one row set per stage "
                                     "(default: `perseus profile synth --gpu a100`)")
    p.add_argument("--blocking-power", type=float, help="simulated GPU's blocking power in W")
    p.add_argument("--perseus", help="the perseus binary (default: $PERSEUS_BIN, PATH, build/)")
    p.add_argument("--pace", action="store_true",
                   help="hold each instruction for its profiled time at the clock in use")
    p.add_argument("--time-scale", type=float, default=0.05,
                   help="with --pace: wall seconds per simulated second")
    p.add_argument("--scheduler", help="per-job scheduler (default: the server's)")
    p.add_argument("--scheduler-args", type=json.loads, help="its arguments, a JSON object")
    p.add_argument("--report-every", type=int, default=5, help="iterations per reporting window")
    p.add_argument("--observe", action="store_true", help="measure only, never set a clock")
    p.add_argument("--write-schedule", help="write the order the job registers (CSV, torch's "
                                            "notation) here, for perseus plan --schedule-file")
    p.add_argument("--result-dir", help="write rankN.json per rank here")
    p.add_argument("--record-clocks", action="store_true",
                   help="with --result-dir: also the clock each instruction ran at on the "
                        "simulated GPU and the plan's clocks, per iteration")
    p.add_argument("--quiet", action="store_true", help="print nothing per iteration")
    args = p.parse_args(argv)
    if args.schedule == "csv" and not args.csv:
        p.error("--schedule csv needs --csv FILE")
    if args.batch_size % args.microbatches:
        p.error("--batch-size must be a multiple of --microbatches")
    if args.d_model % 4:
        p.error("--d-model must be a multiple of 4 (the heads)")
    return args


def digest(modules):
    """SHA-256 of every parameter's bytes, in order: equal digests, bitwise equal parameters."""
    h = hashlib.sha256()
    for module in modules:
        for name, param in module.named_parameters():
            h.update(name.encode())
            h.update(param.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def attach(args, schedule, profile, blocking_power, rank):
    import perseus.torch
    gpu = dict(gpu="nvml") if args.gpu == "nvml" else dict(
        gpu="sim", profile=profile, blocking_power=blocking_power, real_time=args.pace,
        time_scale=args.time_scale, counter="realistic" if args.pace else "ideal")
    return perseus.torch.attach(
        schedule, args.server, **gpu, scheduler=args.scheduler, scheduler_args=args.scheduler_args,
        report_every=args.report_every, observe=args.observe,
        job_metadata=json.dumps({"example": "torch_pipeline", "schedule": args.schedule}),
        log=lambda m: print(f"[rank {rank}] perseus: warning: {m}", file=sys.stderr, flush=True))


def all_done(attachment):
    """True on every rank once any rank's server schedule is final, or the server failed the job
    (an all-reduce, so that all stop after the same iteration)."""
    opt = attachment.optimizer if attachment else None
    flag = torch.tensor([1 if opt and (opt.done or opt.job_failed) else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def worker(rank, args, port, profile, blocking_power):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    device = "cpu"
    if args.device == "cuda":
        torch.cuda.set_device(rank)
        device = f"cuda:{rank}"
    backend = "nccl" if args.device == "cuda" and args.ranks > 1 else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=args.ranks)
    config = ModelConfig(seq=args.seq, d_model=args.d_model, layers=args.layers)
    modules, schedule = build(args.schedule, rank, args.ranks, args.microbatches, config,
                              args.stages_per_rank, args.seed, args.csv, device)
    per_rank = stages_per_rank(args.schedule, args.stages_per_rank)
    mine = local_stages(args.schedule, rank, args.ranks, per_rank)
    first, last = 0 in mine, args.ranks * per_rank - 1 in mine
    params = [p for m in modules for p in m.parameters()]
    optim = torch.optim.Adam(params, lr=args.lr)
    attachment = None if args.no_perseus else attach(args, schedule, profile, blocking_power,
                                                     rank)
    if attachment and args.write_schedule and rank == 0:
        attachment.write_schedule(args.write_schedule)
    client = attachment.optimizer if attachment else None
    losses, walls, cpus, seen, clocks, attached, hook_seconds = [], [], [], [], [], [], 0.0
    for it in range(args.iterations):
        want = not args.alternate or (it // args.alternate) % 2 == 0
        if attachment and want != attachment.attached:
            if attachment.attached:
                hook_seconds += attachment.hook_seconds
                attachment.detach(keep_optimizer=True)
            else:
                import perseus.torch
                attachment = perseus.torch.attach(schedule, optimizer=client)
        on = bool(attachment and attachment.attached)
        attached.append(on)
        x, y = (t.to(device) for t in batch(config, args.batch_size, it, args.seed))
        mb_losses = []
        planned = client.planned_clocks if on else []
        start, cpu_start = time.perf_counter(), time.process_time()
        schedule.step(*([x] if first else []), **({"target": y, "losses": mb_losses}
                                                  if last else {}))
        optim.step()
        optim.zero_grad(set_to_none=True)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu_start)
        if on:
            seen.append(attachment.last_iteration)
            if args.record_clocks:
                n, runs = len(attachment.last_iteration), client.sim.runs()
                ran = runs[len(runs) - n:] if n else []
                clocks.append({"planned": planned, "ran": ran})
        if last:
            losses.append(float(torch.stack(mb_losses).detach().mean()))
            if not args.quiet:
                print(f"iter {it:3d}  loss {losses[-1]:.4f}  {walls[-1] * 1e3:7.1f} ms",
                      flush=True)
        if args.until_done and all_done(attachment):
            break
    result = {"rank": rank, "stages": mine, "losses": losses, "wall_s": walls, "cpu_s": cpus,
              "attached": attached, "digest": digest(modules)}
    if attachment:
        opt = client
        result.update(job_id=opt.job_id, rank_order=attachment.rank_order, seen=seen,
                      round=opt.round, degraded=opt.degraded,
                      mismatched_iterations=opt.mismatched_iterations,
                      iterations=opt.iterations, clocks=clocks,
                      hook_seconds=hook_seconds + (attachment.hook_seconds
                                                   if attachment.attached else 0.0),
                      instructions=sum(len(i) for i in seen), last_window=opt.last_window)
        attachment.detach()
        client.close()
    if args.result_dir:
        os.makedirs(args.result_dir, exist_ok=True)
        with open(os.path.join(args.result_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


def find_perseus(args):
    here = os.path.dirname(os.path.abspath(__file__))
    for c in (args.perseus, os.environ.get("PERSEUS_BIN"),
              *(os.path.join(d, "perseus") for d in os.environ.get("PATH", "").split(":")),
              os.path.join(here, "..", "..", "build", "src", "perseus")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("error: no perseus binary: pass --perseus (or --profile, for train.py), set "
             "PERSEUS_BIN or put perseus on PATH")


def make_profile(args, tmpdir):
    """(profile CSV, blocking power): --profile, or `perseus profile synth` for every stage (a
    GPU's model cut into its stages per rank; backwards also split into input and weight
    parts, for the zero-bubble schedules)."""
    if args.profile:
        return args.profile, args.blocking_power or 0.0
    per_rank = stages_per_rank(args.schedule, args.stages_per_rank)
    out = os.path.join(tmpdir, "profile.csv")
    cmd = [find_perseus(args), "profile", "synth", "--gpu", "a100", "--stages", str(args.ranks),
           "--virtual-stages", str(per_rank), "--split-backward", "--out", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}: {res.stderr.strip() or res.stdout.strip()}")
    blocking = args.blocking_power
    if blocking is None:
        words = res.stdout.split()
        blocking = float(words[words.index("--blocking-power") + 1]) \
            if "--blocking-power" in words else 0.0
    return out, blocking


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    args = parse_args(argv)
    if not args.no_perseus:
        try:
            import perseus.torch  # noqa: F401  (fail before spawning)
        except ImportError as e:
            sys.exit(f"error: cannot import perseus.torch ({e}); set PYTHONPATH=<build>/python "
                     "and run with the project's .venv/bin/python (torch 2.x)")
    with tempfile.TemporaryDirectory(prefix="perseus-torch-") as tmpdir:
        profile, blocking = ((None, 0.0) if args.no_perseus or args.gpu == "nvml" else
                             make_profile(args, tmpdir))
        mp.spawn(worker, args=(args, free_port(), profile, blocking), nprocs=args.ranks,
                 join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
