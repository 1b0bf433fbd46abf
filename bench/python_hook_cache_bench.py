"""What one instruction's hooks (begin + end, on the simulated GPU) cost the training thread warm
and cache-cold, called the ways the Python client offers: its methods
(opt.on_instruction_begin / _end, through pybind11), the plain callables the framework
adapters use (opt._instruction_hooks()), and the whole of what an adapter adds to one compute
call (its C++ bracket around a function that does nothing: label, hooks, time kept). Warm, the hooks run back to back; cold, 64 MiB are
streamed through the caches between them, as a training step's tensors do between two
instructions. In a torch step the cold figure is the one that holds: what a hook costs is mostly
the memory it touches.

    PYTHONPATH=build/python .venv/bin/python bench/python_hook_cache_bench.py [--pairs 1600]
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

from perseus import PipelineFrequencyOptimizer, _perseus

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def pair(begin, end):
    def instruction():
        begin("forward", 0)
        end("forward", 0)
    return instruction


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
        hooks = opt._instruction_hooks()
        state = _perseus._BracketState()
        bracket = _perseus._bracket(lambda chunk: None, *hooks, state, "forward", 0, (0, None))
        # One instruction each way, as one call (the same frame around each).
        ways = {"methods": pair(opt.on_instruction_begin, opt.on_instruction_end),
                "adapter_hooks": pair(*hooks),
                "adapter_bracket": lambda: bracket(0)}
        times = {(way, cold): [] for way in ways for cold in (False, True)}
        opt.on_step_begin()
        state.begin_iteration()
        for _ in range(args.pairs):
            for way, instruction in ways.items():
                for cold in (False, True):
                    if cold:
                        flush += 1.0
                    else:  # warm: right after the same call
                        instruction()
                    t = time.perf_counter()
                    instruction()
                    times[way, cold].append(time.perf_counter() - t)
        opt.on_step_end()
        opt.close()
    for (way, cold), t in times.items():
        print(f"hook_pair_{way}_{'cold' if cold else 'warm'}_us {statistics.median(t) * 1e6:.1f}")


if __name__ == "__main__":
    main()
