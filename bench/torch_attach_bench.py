"""What perseus.torch.attach costs a real torch.distributed.pipelining job on CPU: the iteration
time of the same training (examples/torch_pipeline/train.py, gloo processes) bare and with
Perseus attached to a real `perseus serve` (all-max: every exchange, hook and window close
included; a simulated GPU in virtual time, so that nothing waits for a clock), two ways:

  separate runs   bare and attached runs alternated (bare, attached, bare, ...), so that the
                  machine's drift falls on both; each run's figure is the slowest rank's median
                  iteration time after the warm-up, and the median over the runs is printed. The
                  processes' placement on a loaded machine moves a run's median by more than
                  attaching does (10 % and more with 4 processes on 2 cores).
  same processes  train.py --alternate: the job detaches and attaches again every 5 iterations
                  (one reporting window, so window closes and exchanges come at their real rate),
                  and the slowest rank's median over its attached iterations is set against its
                  median over its bare ones, after the warm-up; medians over the runs. Drift and
                  placement fall on both alike.

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
    cmd += ["--alternate", "5"] if mode == "alternate" else []
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    medians, hooks = {}, []
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as f:
            r = json.load(f)
        walls = {}
        for wall, on in list(zip(r["wall_s"], r["attached"]))[args.warmup:]:
            walls.setdefault(on, []).append(wall)
        for on, w in walls.items():
            medians[on] = max(medians.get(on, 0.0), statistics.median(w))
        if mode != "bare":
            trained = sum(w for w, on in zip(r["wall_s"], r["attached"]) if on)
            hooks.append((r["hook_seconds"], r["instructions"], trained))
    return medians, hooks


def overhead(label, bare, attached):
    b, a = statistics.median(bare), statistics.median(attached)
    print(f"{label}_bare_ms {b * 1e3:.2f}")
    print(f"{label}_attached_ms {a * 1e3:.2f}")
    print(f"{label}_overhead_pct {100 * (a / b - 1):.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--iterations", type=int, default=20, help="measured iterations per run")
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
        runs = {"separate": {False: [], True: []}, "same": {False: [], True: []}}
        hooks = []
        try:
            for i in range(args.pairs):
                for mode in ("bare", "attached", "alternate"):
                    out = os.path.join(tmp, f"run{i}-{mode}")
                    os.mkdir(out)
                    medians, h = run(args, out, url, mode)
                    hooks += h
                    kind = "same" if mode == "alternate" else "separate"
                    for on, t in medians.items():
                        runs[kind][on].append(t)
                    shown = "  ".join(f"{'attached' if on else 'bare'} {t * 1e3:.2f} ms"
                                      for on, t in sorted(medians.items()))
                    print(f"run {i} {mode:9s} {shown}", flush=True)
        finally:
            server.terminate()
            server.wait()
    print(f"schedule {args.schedule}, {args.ranks} ranks, 8 microbatches, median iteration of "
          f"{args.iterations} after {args.warmup} per run and kind, median of {args.pairs} runs:")
    overhead("separate_runs", runs["separate"][False], runs["separate"][True])
    overhead("same_processes", runs["same"][False], runs["same"][True])
    # In-process: the time each rank's training thread spent in the hooks (every run, rank).
    per_instruction = statistics.median(s / n for s, n, _ in hooks)
    share = statistics.median(s / wall for s, _, wall in hooks)
    print(f"hook_us_per_instruction {per_instruction * 1e6:.1f}")
    print(f"hook_share_of_training_pct {100 * share:.3f}")


if __name__ == "__main__":
    main()
