"""How fast NVML's power readings follow a real GPU's load, read-only: polls
nvmlDeviceGetFieldValues for NVML_FI_DEV_POWER_INSTANT (186) and NVML_FI_DEV_POWER_AVERAGE (185)
on a thread of its own while the training thread runs forwards and backwards (each followed by a
synchronize) of two models, in two orders: alternating, and alternating with an idle gap of a
forward+backward's length every four instructions; after each case it also takes the driver's
buffered power samples of that case (nvmlDeviceGetSamples, NVML_TOTAL_POWER_SAMPLES: each with
the driver's timestamp). Records every poll (time, the driver's own timestamp, value, return
code), every buffered sample and every instruction's span, so that an analysis
(instant_power_summary.py) can tell whether the readings resolve a forward from a backward
(issue 11: the energy counter refreshes every 100 ms and cannot when the two alternate).

Writes JSON to argv[1]. PERSEUS_GPU_DRY=1 runs on the CPU against the library named by
$PERSEUS_FAKE_NVML (which may lack the field call: then each poll records the error). Never
changes a GPU setting.
"""
import ctypes
import json
import os
import sys
import threading
import time

import torch

from gpu_models import memory_bound, transformer

DRY = os.environ.get("PERSEUS_GPU_DRY") == "1"
DEVICE = "cpu" if DRY else "cuda"
SECONDS = 0.5 if DRY else 3.0
FIELDS = {"instant": 186, "average": 185}


class FieldValue(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint),
                ("timestamp", ctypes.c_longlong), ("latencyUsec", ctypes.c_longlong),
                ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


class Sample(ctypes.Structure):  # nvmlSample_t: the value is a union of 8 bytes
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("value", ctypes.c_ulonglong)]


NVML_TOTAL_POWER_SAMPLES = 0
VALUE_TYPES = {0: "double", 1: "uint", 2: "ulong", 3: "ulonglong", 4: "longlong"}


class Nvml:
    def __init__(self):
        self.lib = ctypes.CDLL(os.environ["PERSEUS_FAKE_NVML"] if DRY else "libnvidia-ml.so.1")
        self.lib.nvmlInit_v2()
        self.handle = ctypes.c_void_p()
        self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle))
        self.get = getattr(self.lib, "nvmlDeviceGetFieldValues", None)

    def fields(self):
        values = (FieldValue * len(FIELDS))()
        for i, field in enumerate(FIELDS.values()):
            values[i].fieldId = field
        rc = self.get(self.handle, len(FIELDS), values) if self.get else -1
        return rc, [(v.timestamp, v.nvmlReturn, v.valueType, v.value) for v in values]

    def buffered(self, since_us):
        """(return code, [[driver timestamp in us, value in mW], ...]) of the power samples the
        driver buffered after `since_us` (its clock: microseconds since the epoch)."""
        get = getattr(self.lib, "nvmlDeviceGetSamples", None)
        if get is None:
            return -1, []
        kind, count = ctypes.c_int(), ctypes.c_uint(0)
        rc = get(self.handle, NVML_TOTAL_POWER_SAMPLES, ctypes.c_ulonglong(since_us),
                 ctypes.byref(kind), ctypes.byref(count), None)
        if rc != 0 or count.value == 0:
            return rc, []
        samples = (Sample * count.value)()
        rc = get(self.handle, NVML_TOTAL_POWER_SAMPLES, ctypes.c_ulonglong(since_us),
                 ctypes.byref(kind), ctypes.byref(count), samples)
        if rc != 0:
            return rc, []
        if VALUE_TYPES.get(kind.value) == "double":
            value = lambda v: ctypes.c_double.from_buffer_copy(v.to_bytes(8, "little")).value
        else:
            value = lambda v: v & 0xFFFFFFFF if kind.value == 1 else v
        return 0, [[s.timeStamp, value(s.value)] for s in samples[:count.value]]


def poll(nvml, stop, out):
    while not stop.is_set():
        t0 = time.monotonic()
        rc, values = nvml.fields()
        out.append([0.5 * (t0 + time.monotonic()), rc, values])
        time.sleep(0.0002)


def models():
    if DRY:
        yield "tiny", memory_bound(64), (4, 32, 64)
        return
    yield "memory-bound", memory_bound(8192), (16, 2048, 8192)
    yield "transformer", transformer(4096, 32, 16384), (8, 2048, 4096)


def sync():
    if not DRY:
        torch.cuda.synchronize()


def run(net, x, gap_s, spans):
    end = time.monotonic() + SECONDS
    i = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        y = net(x)
        sync()
        t1 = time.monotonic()
        y.float().sum().backward()
        sync()
        spans.append([t0, t1, 0])
        spans.append([t1, time.monotonic(), 1])
        i += 1
        if gap_s and i % 2 == 0:
            time.sleep(gap_s)


def main():
    nvml = Nvml()
    out = {"device": "cpu (dry run)" if DRY else torch.cuda.get_device_name(0), "cases": []}
    for name, net, shape in models():
        net = net.to(DEVICE).to(torch.bfloat16)
        x = torch.randn(*shape, device=DEVICE, dtype=torch.bfloat16)
        for _ in range(3):
            net(x).float().sum().backward()
        sync()
        t0 = time.monotonic()
        net(x).float().sum().backward()
        sync()
        pair_s = time.monotonic() - t0
        for order, gap_s in (("alternating", 0.0), ("gaps", pair_s)):
            samples, spans, stop = [], [], threading.Event()
            thread = threading.Thread(target=poll, args=(nvml, stop, samples), daemon=True)
            # The driver's sample clock is the epoch's, in microseconds: both clocks at the start
            # map it onto the spans' monotonic one.
            clocks = [time.time(), time.monotonic()]
            thread.start()
            run(net, x, gap_s, spans)
            stop.set()
            thread.join()
            rc, buffered = nvml.buffered(int(clocks[0] * 1e6))
            out["cases"].append({"model": name, "order": order, "gap_s": gap_s,
                                 "spans": spans, "samples": samples, "clocks": clocks,
                                 "buffered_rc": rc, "buffered": buffered})
            print(name, order, len(spans), "spans", len(samples), "polls", len(buffered),
                  f"buffered samples (rc {rc})", flush=True)
        del net, x
        if not DRY:
            torch.cuda.empty_cache()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
