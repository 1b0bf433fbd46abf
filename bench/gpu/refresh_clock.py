"""Whether a real GPU's energy counter refreshes on a clock of its own (a fixed period) or at
irregular times, read-only: polls nvmlDeviceGetTotalEnergyConsumption back to back on one
thread for SECONDS idle, then for SECONDS while a second process keeps the GPU busy, and keeps
every call's start, end and value. A change happened after the start of the last call that
returned the old value and before the end of the first call that returned the new one; the
analysis (refresh_clock_summary.py) checks whether one period and phase put a refresh inside
every such bracket. Issue 11: a counter on a clock of its own lets the attribution take each
change's time from that clock instead of from the reads around it.

Writes JSON to argv[1]. PERSEUS_GPU_DRY=1 runs on the CPU against $PERSEUS_FAKE_NVML with no
load. Never changes a GPU setting.
"""
import ctypes
import json
import os
import subprocess
import sys
import time

DRY = os.environ.get("PERSEUS_GPU_DRY") == "1"
SECONDS = 0.6 if DRY else 4.0
LOAD = """
import time, torch
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + float(__import__("sys").argv[1])
while time.monotonic() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
"""


def nvml():
    lib = ctypes.CDLL(os.environ["PERSEUS_FAKE_NVML"] if DRY else "libnvidia-ml.so.1")
    if lib.nvmlInit_v2() != 0:
        sys.exit("refresh_clock: nvmlInit_v2 failed")
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
        sys.exit("refresh_clock: no device 0")
    return lib, handle


def poll(lib, handle, seconds):
    value, reads = ctypes.c_ulonglong(), []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        rc = lib.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(value))
        reads.append([t0, time.monotonic(), value.value if rc == 0 else None])
    return reads


def main():
    lib, handle = nvml()
    out = {"idle": poll(lib, handle, SECONDS)}
    if not DRY:
        load = subprocess.Popen([sys.executable, "-c", LOAD, str(SECONDS + 6.0)])
        time.sleep(5.0)  # CUDA start-up and clocks settle
        out["load"] = poll(lib, handle, SECONDS)
        load.wait()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
    for name, reads in out.items():
        changes = sum(1 for a, b in zip(reads, reads[1:]) if a[2] != b[2])
        print(f"refresh_clock {name}: {len(reads)} reads, {changes} changes")


if __name__ == "__main__":
    main()
