#!/usr/bin/python3
"""Pipeline-parallel training of a small GPT-like model on CPU with the Perseus client.

Four processes (torch.multiprocessing spawn, torch.distributed with gloo on loopback) each run
one pipeline stage of a tiny causal transformer (embedding + blocks | blocks | blocks |
blocks + LM head) on synthetic token data, with the synchronous 1F1B schedule and explicit
point-to-point transfers of activations and gradients. Every forward/backward runs inside
``opt.instruction(...)`` and every iteration between ``on_step_begin``/``on_step_end`` of a
``perseus.PipelineFrequencyOptimizer`` driving a simulated GPU (``gpu="sim"``) that follows a
4-stage profile, in real time scaled by ``--time-scale``. With ``--server`` the clocks come from
a Perseus server; without, the client runs at the default (max) clock.

Rank 0 prints one line per iteration: the loss (sent by the last stage) and its own measured
time and energy. ``--check`` exits non-zero unless the loss went down.

    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_pipeline/train.py \\
        --perseus build/src/perseus --iterations 20
"""

import argparse
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

# The transformer block and the synthetic data of examples/torch_pipeline (the same model, cut by
# hand here).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "torch_pipeline"))
from model import Block, ModelConfig  # noqa: E402
from model import batch as model_batch  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", help="Perseus server URL (default: none, run at the default clock)")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--microbatches", type=int, default=4, help="microbatches per iteration (M)")
    p.add_argument("--microbatch-size", type=int, default=4, help="sequences per microbatch")
    p.add_argument("--stages", type=int, default=4, help="pipeline stages = processes")
    p.add_argument("--layers-per-stage", type=int, default=2)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", help="profile CSV with one stage per process (default: generate "
                                     "one with `perseus profile synth --gpu a100`)")
    p.add_argument("--perseus", help="the perseus binary (default: $PERSEUS_BIN or PATH)")
    p.add_argument("--blocking-power", type=float,
                   help="simulated GPU's blocking power in W (default: the synth GPU's)")
    p.add_argument("--time-scale", type=float, default=0.5,
                   help="wall seconds per simulated second of the real-time simulated GPU "
                        "(much smaller and the CPU's own compute time dominates the "
                        "measurements)")
    p.add_argument("--scheduler", help="per-job scheduler name (server default when absent)")
    p.add_argument("--scheduler-args", help="scheduler arguments as a JSON object")
    p.add_argument("--report-every", type=int, default=5, help="iterations per reporting window")
    p.add_argument("--job-id", help="join an existing job instead of registering one")
    p.add_argument("--check", action="store_true",
                   help="exit non-zero unless the loss of the last iteration is below the first")
    args = p.parse_args(argv)
    if args.scheduler_args is not None:
        try:
            args.scheduler_args = json.loads(args.scheduler_args)
        except json.JSONDecodeError as e:
            p.error(f"--scheduler-args: not JSON: {e}")
        if not isinstance(args.scheduler_args, dict):
            p.error("--scheduler-args: must be a JSON object")
    if args.stages < 2 or args.microbatches < 1 or args.iterations < 1:
        p.error("need --stages >= 2, --microbatches >= 1, --iterations >= 1")
    if args.d_model % args.heads:
        p.error("--d-model must be a multiple of --heads")
    return args


# Model ------------------------------------------------------------------------------------------


class Stage(nn.Module):
    """One pipeline stage: [embedding] + blocks + [final norm and LM head]."""

    def __init__(self, args, stage):
        super().__init__()
        self.first, self.last = stage == 0, stage == args.stages - 1
        d = args.d_model
        if self.first:
            self.tok = nn.Embedding(args.vocab, d)
            self.pos = nn.Parameter(torch.randn(args.seq, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, args.heads) for _ in range(args.layers_per_stage))
        if self.last:
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, args.vocab, bias=False)

    def forward(self, x):
        if self.first:
            x = self.tok(x) + self.pos[: x.shape[1]]
        for block in self.blocks:
            x = block(x)
        if self.last:
            x = self.head(self.ln(x))
        return x


def batch(args, iteration):
    """Synthetic data, identical on every rank (model.batch: arithmetic token sequences, whose
    next token follows from the two before it), as M (inputs, targets) pairs."""
    config = ModelConfig(vocab=args.vocab, seq=args.seq)
    inputs, targets = model_batch(config, args.microbatches * args.microbatch_size, iteration,
                                  args.seed)
    return list(zip(inputs.split(args.microbatch_size), targets.split(args.microbatch_size)))


# Pipeline ---------------------------------------------------------------------------------------


def one_f_one_b(stages, stage, microbatches):
    """Synchronous 1F1B order of one stage (architecture section 4): min(S-s, M) warm-up forwards,
    then alternate backward/forward, then drain the backwards."""
    order, f, b = [], 0, 0
    for _ in range(min(stages - stage, microbatches)):
        order.append(("forward", f))
        f += 1
    while b < microbatches:
        order.append(("backward", b))
        b += 1
        if f < microbatches:
            order.append(("forward", f))
            f += 1
    return order


def train_iteration(args, rank, model, optim, opt, data):
    """One iteration; returns the last stage's mean loss (None on other stages).

    Receives block (dist.recv); sends are dist.isend so that a stage never waits for its
    neighbour to post the matching receive (1F1B with min(S-s, M) warm-ups would otherwise
    deadlock on rendezvous transports); all sends complete before the optimizer step."""
    S, M = args.stages, args.microbatches
    first, last = rank == 0, rank == S - 1
    shape = (args.microbatch_size, args.seq, args.d_model)
    inputs, outputs, sends, losses = {}, {}, [], []
    for kind, j in one_f_one_b(S, rank, M):
        if kind == "forward":
            if first:
                x = data[j][0]
            else:
                x = torch.empty(shape)
                dist.recv(x, src=rank - 1, tag=j)
                x.requires_grad_()
            with opt.instruction("forward"):
                y = model(x)
                if last:
                    y = F.cross_entropy(y.reshape(-1, args.vocab), data[j][1].reshape(-1)) / M
                    losses.append(y.item())
            if not last:
                out = y.detach().contiguous()
                sends.append((dist.isend(out, dst=rank + 1, tag=j), out))
            inputs[j], outputs[j] = x, y
        else:
            if last:
                grad = None
            else:
                grad = torch.empty(shape)
                dist.recv(grad, src=rank + 1, tag=M + j)
            with opt.instruction("backward"):
                outputs.pop(j).backward(grad)
            x = inputs.pop(j)
            if not first:
                grad_in = x.grad.contiguous()
                sends.append((dist.isend(grad_in, dst=rank - 1, tag=M + j), grad_in))
    for handle, _tensor in sends:  # the tensor stays referenced until its send completed
        handle.wait()
    optim.step()
    optim.zero_grad(set_to_none=True)
    return sum(losses) if last else None


def make_optimizer(perseus, rank, args, profile, blocking_power):
    """This rank's Perseus client on a simulated GPU (the example runs on CPUs)."""
    return perseus.PipelineFrequencyOptimizer(
        rank, 0, rank, 0, 0, 1, args.stages, 1, args.stages, args.server,
        json.dumps({"example": "pytorch_pipeline", "stages": args.stages,
                    "microbatches": args.microbatches}),
        gpu="sim", profile=profile, blocking_power=blocking_power, real_time=True,
        time_scale=args.time_scale, job_id=args.job_id, scheduler=args.scheduler,
        scheduler_args=args.scheduler_args, report_every=args.report_every,
        log=lambda msg: print(f"[rank {rank}] perseus: warning: {msg}", file=sys.stderr,
                              flush=True))


def summarize(args, opt, losses, wall):
    """Rank 0's last lines: loss and measured totals; with --check, fails unless the loss went
    down and every closed reporting window was measured."""
    times = [t for t, _ in opt.iterations]
    energies = [e for _, e in opt.iterations]
    print(f"done in {time.monotonic() - wall:.1f} s wall: loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f}; simulated {sum(times):.2f} s, {sum(energies):.0f} J on "
          f"stage 0", flush=True)
    if not args.check:
        return
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError(f"check failed: non-finite loss {losses}")
    if not losses[-1] < losses[0]:
        raise RuntimeError(f"check failed: loss did not go down: {losses}")
    windows = args.iterations - args.iterations % args.report_every
    if len(opt.iterations) != windows:
        raise RuntimeError(f"check failed: {len(opt.iterations)} measured iterations, "
                           f"expected {windows} (the closed reporting windows)")
    print("check passed: loss went down", flush=True)


def worker(rank, args, port, profile, blocking_power):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.stages)
    import perseus  # after init_process_group: the job id is broadcast over torch.distributed

    torch.manual_seed(args.seed * 1009 + rank)
    model = Stage(args, rank)
    optim = torch.optim.Adam(model.parameters(), lr=args.lr)
    opt = make_optimizer(perseus, rank, args, profile, blocking_power)
    if rank == 0:
        print(f"job {opt.job_id or '(none)'}: {args.stages} stages, {args.microbatches} "
              f"microbatches, {sum(p.numel() for p in model.parameters())} parameters on "
              f"stage 0", flush=True)
    loss_box = torch.zeros(1)
    losses = []
    shown = 0  # iterations whose measurements were printed
    wall = time.monotonic()
    for it in range(args.iterations):
        data = batch(args, it)
        opt.on_step_begin()
        loss = train_iteration(args, rank, model, optim, opt, data)
        opt.on_step_end()
        # The last stage owns the loss; rank 0 prints it with its own measurements.
        if rank == args.stages - 1:
            dist.send(torch.tensor([loss]), dst=0, tag=1 << 20)
        elif rank == 0:
            dist.recv(loss_box, src=args.stages - 1, tag=1 << 20)
            losses.append(loss_box.item())
            print(f"iter {it:3d}  loss {losses[-1]:.4f}", flush=True)
            # Energy is attributed from the GPU's counter when a reporting window closes.
            state = ("degraded" if opt.degraded else
                     "default clock" if opt.round < 0 else f"round {opt.round}")
            for t, e in opt.iterations[shown:]:
                print(f"  measured iter {shown:3d}  time {t:7.3f} s  energy {e:8.1f} J  "
                      f"({state})", flush=True)
                shown += 1
    if rank == 0:
        summarize(args, opt, losses, wall)
    opt.close()
    dist.barrier()
    dist.destroy_process_group()


# Setup ------------------------------------------------------------------------------------------


def find_perseus(args):
    candidates = [args.perseus, os.environ.get("PERSEUS_BIN"), shutil.which("perseus")]
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "src", "perseus"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("error: no perseus binary to generate a profile: pass --perseus or --profile, "
             "or set PERSEUS_BIN")


def make_profile(args, tmpdir):
    """Returns (profile path, blocking power)."""
    if args.profile:
        return args.profile, args.blocking_power or 0.0
    out = os.path.join(tmpdir, "profile.csv")
    cmd = [find_perseus(args), "profile", "synth", "--gpu", "a100", "--stages",
           str(args.stages), "--out", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {res.stderr.strip() or res.stdout.strip()}")
    blocking = args.blocking_power
    if blocking is None:
        m = re.search(r"--blocking-power ([0-9.eE+-]+)", res.stdout)
        blocking = float(m.group(1)) if m else 0.0
    print(res.stdout.strip(), flush=True)
    return out, blocking


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    args = parse_args(argv)
    try:
        import perseus  # noqa: F401  (fail early, before spawning)
    except ImportError as e:
        sys.exit(f"error: cannot import perseus ({e}); set PYTHONPATH=<build>/python")
    if not args.server:
        print("no --server: the client runs at the default clock", flush=True)
    with tempfile.TemporaryDirectory(prefix="perseus-example-") as tmpdir:
        profile, blocking = make_profile(args, tmpdir)
        try:
            mp.spawn(worker, args=(args, free_port(), profile, blocking), nprocs=args.stages,
                     join=True)
        except Exception as e:  # a worker failed: its traceback was printed already
            print(f"error: {str(e).strip().splitlines()[-1] if str(e).strip() else e}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
