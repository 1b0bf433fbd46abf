"""What perseus.torch.attach costs a real torch.distributed.pipelining job on CPU: the iteration
time of the same training (examples/torch_pipeline/train.py, 4 gloo processes) bare and with
Perseus attached to a real `perseus serve` (all-max: every exchange, hook and window close
included; a simulated GPU in virtual time, so that nothing waits for a clock), runs alternated
(bare, attached, bare, ...) so that the machine's drift falls on both. Each run's iteration time
is the slowest rank's median over the iterations after the warm-up; printed per run and as the
median over the runs, side by side. The machine's noise (4 processes on the cores there are)
can exceed the difference, so it also prints what the hooks cost in-process: the time each
rank's training thread spent inside them (Attachment.hook_seconds), per instruction and as a share
of the training time.

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


def run(args, out, attached, url):
    cmd = [sys.executable, TRAIN, "--schedule", args.schedule, "--ranks", str(args.ranks),
           "--iterations",
           str(args.warmup + args.iterations), "--microbatches", "8", "--batch-size", "32",
           "--result-dir", out, "--quiet", "--perseus", args.perseus]
    cmd += ["--server", url] if attached else ["--no-perseus"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    medians, hooks = [], []
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as f:
            r = json.load(f)
        medians.append(statistics.median(r["wall_s"][args.warmup:]))
        if attached:
            hooks.append((r["hook_seconds"], r["instructions"], sum(r["wall_s"])))
    return max(medians), hooks


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
        times, hooks = {False: [], True: []}, []
        try:
            for i in range(args.pairs):
                for attached in (False, True):
                    out = os.path.join(tmp, f"run{i}{int(attached)}")
                    os.mkdir(out)
                    t, h = run(args, out, attached, url)
                    times[attached].append(t)
                    hooks += h
                    print(f"pair {i}: {'attached' if attached else 'bare    '} "
                          f"{times[attached][-1] * 1e3:8.2f} ms per iteration", flush=True)
        finally:
            server.terminate()
            server.wait()
    bare, attached = statistics.median(times[False]), statistics.median(times[True])
    print(f"schedule {args.schedule}, {args.ranks} ranks, 8 microbatches, median of {args.iterations} "
          f"iterations after {args.warmup}, {args.pairs} runs each:")
    print(f"bare_ms {bare * 1e3:.2f}")
    print(f"attached_ms {attached * 1e3:.2f}")
    print(f"overhead_pct {100 * (attached / bare - 1):.2f}")
    # In-process: the time each rank's training thread spent in the hooks (every run, rank).
    per_instruction = statistics.median(s / n for s, n, _ in hooks)
    share = statistics.median(s / wall for s, _, wall in hooks)
    print(f"hook_us_per_instruction {per_instruction * 1e6:.1f}")
    print(f"hook_share_of_training_pct {100 * share:.3f}")


if __name__ == "__main__":
    main()
