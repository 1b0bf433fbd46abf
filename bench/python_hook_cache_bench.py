"""What one instruction's hooks (on_instruction_begin + on_instruction_end, through the Python
client, on the simulated GPU) cost the training thread warm and cache-cold: warm, the hooks run
back to back; cold, 64 MiB are streamed through the caches between them, as a training step's
tensors do between two instructions. On a torch job the hooks measured in place (11 us begin,
28 us end, median) are the cold figure, not the warm one: what they cost is mostly the memory
they touch.

    PYTHONPATH=build/python .venv/bin/python bench/python_hook_cache_bench.py [--pairs 1600]
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

from perseus import PipelineFrequencyOptimizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=1600, help="instructions of each kind timed")
    p.add_argument("--perseus", default=os.environ.get("PERSEUS_BIN",
                                                       os.path.join(ROOT, "build/src/perseus")))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "profile.csv")
        subprocess.run([args.perseus, "profile", "synth", "--gpu", "a100", "--stages", "1",
                        "--out", profile], check=True, capture_output=True)
        opt = PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu="sim",
                                         profile=profile, stage=0, blocking_power=80.0,
                                         counter="ideal", report_every=10 ** 6)
        flush = np.ones(64 * 1024 * 1024 // 8)
        warm, cold = [], []
        opt.on_step_begin()
        for _ in range(args.pairs):
            t = time.perf_counter()
            opt.on_instruction_begin("forward", 0)
            opt.on_instruction_end("forward", 0)
            warm.append(time.perf_counter() - t)
            flush += 1.0
            t = time.perf_counter()
            opt.on_instruction_begin("backward", 0)
            opt.on_instruction_end("backward", 0)
            cold.append(time.perf_counter() - t)
        opt.on_step_end()
        opt.close()
    print(f"hook_pair_warm_us {statistics.median(warm) * 1e6:.1f}")
    print(f"hook_pair_cold_us {statistics.median(cold) * 1e6:.1f}")


if __name__ == "__main__":
    main()
