"""What perseus.torch.attach costs a real torch.distributed.pipelining job on CPU: the iteration
time of the same training (examples/torch_pipeline/train.py, gloo processes) bare and with
Perseus attached to a real `perseus serve` (all-max: every exchange, hook and window close
included; a simulated GPU in virtual time, so that nothing waits for a clock), two ways:

  separate runs   bare and attached runs alternated (bare, attached, bare, ...), so that the
                  machine's drift falls on both; each run's figure is the slowest rank's median
                  iteration time after the warm-up, and the median over the runs is printed. The
                  processes' placement on a loaded machine moves a run's median by more than
                  attaching does (10 % and more with 4 processes on 2 cores).
  same processes  train.py --alternate 1: the job detaches and attaches again every iteration
                  (the client keeps its job and closes a reporting window every 5 attached
                  iterations, so window closes and exchanges come at their real rate per attached
                  iteration). Each attached iteration (the pipeline's: its slowest rank's time) is
                  set against the bare one just before it, so that the machine's drift, which
                  moves its speed by 10 % over seconds here, falls on both: the median of these
                  paired ratios over every run is the overhead (as a median it leaves out the one
                  iteration in 5 that closes a window); the ratio of the means over the same
                  iterations includes them.

It also prints what the hooks cost in-process: the time each rank's training thread spent inside
them (Attachment.hook_seconds), per instruction and as a share of the training time.

    PYTHONPATH=build/python .venv/bin/python bench/torch_attach_bench.py [--pairs 3]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TRAIN = os.path.join(ROOT, "examples", "torch_pipeline", "train.py")


def run(args, out, url, mode):
    """Runs train.py once: mode "bare", "attached" or "alternate". Returns {attached: the
    slowest rank's median iteration time after the warm-up} and the attached ranks' hook
    figures (hook seconds, instructions, seconds trained)."""
    iterations = args.warmup + args.iterations * (2 if mode == "alternate" else 1)
    cmd = [sys.executable, TRAIN, "--schedule", args.schedule, "--ranks", str(args.ranks),
           "--iterations", str(iterations), "--microbatches", "8", "--batch-size", "32",
           "--result-dir", out, "--quiet", "--perseus", args.perseus]
    cmd += ["--no-perseus"] if mode == "bare" else ["--server", url]
    cmd += ["--alternate", "1"] if mode == "alternate" else []
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    ranks, hooks = [], []
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as f:
            r = json.load(f)
        ranks.append(r)
        if mode != "bare":
            trained = sum(w for w, on in zip(r["wall_s"], r["attached"]) if on)
            hooks.append((r["hook_seconds"], r["instructions"], trained))
    # The pipeline's time per iteration: its slowest rank's.
    walls = [max(w) for w in zip(*(r["wall_s"] for r in ranks))]
    attached = ranks[0]["attached"]
    kept = list(zip(walls, attached))[args.warmup:]
    medians = {on: statistics.median(w for w, a in kept if a == on) for on in set(attached)}
    pairs = [(walls[i - 1], walls[i]) for i in range(max(1, args.warmup), len(walls))
             if attached[i] and not attached[i - 1]]
    return medians, pairs, hooks


def overhead(label, bare, attached):
    b, a = statistics.median(bare), statistics.median(attached)
    print(f"{label}_bare_ms {b * 1e3:.2f}")
    print(f"{label}_attached_ms {a * 1e3:.2f}")
    print(f"{label}_overhead_pct {100 * (a / b - 1):.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--iterations", type=int, default=40,
                   help="measured iterations per run (of each kind, alternating)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("--ranks", type=int, default=4,
                   help="processes (more than the machine's cores adds scheduling noise)")
    p.add_argument("--perseus", default=os.environ.get("PERSEUS_BIN",
                                                       os.path.join(ROOT, "build/src/perseus")))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [args.perseus, "serve", "--port", "0", "--store", os.path.join(tmp, "s.sqlite"),
             "--output-dir", tmp, "--data-dir", tmp, "--scheduler", "all-max"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        url = re.search(r"http://[\d.]+:\d+", server.stdout.readline()).group(0)
        separate = {False: [], True: []}
        pairs, hooks = [], []
        try:
            for i in range(args.pairs):
                for mode in ("bare", "attached", "alternate"):
                    out = os.path.join(tmp, f"run{i}-{mode}")
                    os.mkdir(out)
                    medians, p, h = run(args, out, url, mode)
                    hooks += h
                    pairs += p
                    if mode != "alternate":
                        separate[mode == "attached"].append(medians[mode == "attached"])
                    shown = "  ".join(f"{'attached' if on else 'bare'} {t * 1e3:.2f} ms"
                                      for on, t in sorted(medians.items()))
                    print(f"run {i} {mode:9s} median {shown}", flush=True)
        finally:
            server.terminate()
            server.wait()
    print(f"schedule {args.schedule}, {args.ranks} ranks, 8 microbatches, {args.iterations} "
          f"iterations of each kind after {args.warmup} per run, {args.pairs} runs of each:")
    overhead("separate_runs", separate[False], separate[True])
    print(f"same_processes_pairs {len(pairs)}")
    print(f"same_processes_bare_ms {statistics.median(b for b, _ in pairs) * 1e3:.2f}")
    print(f"same_processes_attached_ms {statistics.median(a for _, a in pairs) * 1e3:.2f}")
    print(f"same_processes_overhead_pct "
          f"{100 * statistics.median(a / b - 1 for b, a in pairs):.2f}")
    means = statistics.mean(a for _, a in pairs) / statistics.mean(b for b, _ in pairs)
    print(f"same_processes_mean_overhead_pct {100 * (means - 1):.2f}")
    # In-process: the time each rank's training thread spent in the hooks (every run, rank).
    per_instruction = statistics.median(s / n for s, n, _ in hooks)
    share = statistics.median(s / wall for s, _, wall in hooks)
    print(f"hook_us_per_instruction {per_instruction * 1e6:.1f}")
    print(f"hook_share_of_training_pct {100 * share:.3f}")


if __name__ == "__main__":
    main()
