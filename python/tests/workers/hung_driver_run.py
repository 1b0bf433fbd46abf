"""A training process whose GPU driver stops answering (test_nvml.py and
bench/hung_driver_stress.sh run it): two iterations, then the fake libnvidia-ml's hang file is
made, so that every NVML device call blocks for good; ten more iterations, then close().
Prints "training S" and "close S" (their durations) and the client's warnings, and must end
with exit code 0. Arguments: the hang file, the fake library, then optionally "torch" to import
torch first (the exit path of a process with torch's threads and atexit handlers)."""

import sys
import time

if sys.argv[3:] == ["torch"]:
    import torch  # noqa: F401

import perseus

hang, library = sys.argv[1], sys.argv[2]
opt = perseus.PipelineFrequencyOptimizer(
    0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu=perseus.NvmlGpu(0, library=library), report_every=2,
    shutdown_bound=0.5, log=lambda line: print("warning:", line, flush=True))


def train(iterations):
    for _ in range(iterations):
        with opt.step():
            for name in ("forward", "backward"):
                with opt.instruction(name):
                    time.sleep(0.01)


train(2)
open(hang, "w").close()  # from now on every NVML device call blocks
start = time.monotonic()
train(10)
print("training", time.monotonic() - start, flush=True)
start = time.monotonic()
opt.close()
print("close", time.monotonic() - start, flush=True)
