"""When a real GPU's energy counter counts the energy spent at a given moment, measured directly
and without any truth, read-only: short bursts of work (about 6 ms of bf16 matmuls) on an
otherwise idle GPU, 200-260 ms apart at random, while a thread reads
nvmlDeviceGetTotalEnergyConsumption back to back. Each burst's GPU time comes from CUDA events,
each counter change's time from the refresh clock the changes fit (refresh_clock.py). A burst
whose energy the counter splits between two refreshes says which share of it the earlier
refresh counted; against the burst's distance s before that refresh, that share traces the
counter's response: the attribution's model (perseus.NVML_COUNTER_LAG_S and
NVML_COUNTER_WINDOW_S) says energy spent s before a refresh is counted by it with probability
clamp((s - lag + window / 2) / window, 0, 1). Issue 11: the lag and window were so far fitted
only to the residuals of training windows, where forward and backward differ by 25 % in power;
a burst against idle differs by about 8 times.

Writes JSON (reads and bursts) to argv[1] and prints the summary; `--summary FILE` prints it
again. PERSEUS_GPU_DRY=1 runs on the CPU against $PERSEUS_FAKE_NVML with sleeps for bursts.
Never changes a GPU setting."""
import json
import os
import random
import sys
import threading
import time

import numpy as np
from perseus import NVML_COUNTER_LAG_S as LAG_S, NVML_COUNTER_WINDOW_S as WINDOW_S

from refresh_clock import nvml, poll
from refresh_clock_summary import brackets

DRY = os.environ.get("PERSEUS_GPU_DRY") == "1"
SECONDS = 1.5 if DRY else 20.0
BURST_S = 0.006
SPACING_S = (0.200, 0.260)
EDGE_S = (0.060, 0.015)  # a burst this far before / after an interval's ends may count in it


class Burst:
    """Runs about BURST_S of matmuls and says when they ran, in time.monotonic() seconds."""

    def __init__(self):
        import torch
        self.torch = torch
        self.x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        self.count = 1
        self.run()  # cuBLAS's first call
        self.count = max(1, round(BURST_S / self.run()[1] * self.count))

    def run(self):
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.monotonic()
        start.record()
        for _ in range(self.count):
            self.x @ self.x
        end.record()
        end.synchronize()
        return t0, start.elapsed_time(end) * 1e-3


def measure():
    lib, handle = nvml()
    burst = None if DRY else Burst()
    reads, bursts = [], []
    poller = threading.Thread(target=lambda: reads.extend(poll(lib, handle, SECONDS + 0.4)))
    poller.start()
    end = time.monotonic() + SECONDS
    time.sleep(0.2)
    while time.monotonic() < end:
        bursts.append(burst.run() if burst else (time.monotonic(), BURST_S))
        if DRY:
            time.sleep(BURST_S)
        time.sleep(random.uniform(*SPACING_S))
    poller.join()
    return {"reads": reads, "bursts": bursts}


def counter_intervals(reads):
    """(tick times on the fitted refresh clock, energy in J between consecutive ticks)."""
    br = brackets(reads)
    values, prev = [], None
    for r in reads:
        if r[2] is not None and r[2] != prev:
            values.append(r[2])
            prev = r[2]
    mid = br.mean(axis=1)
    gaps = np.diff(mid)  # a count of periods per gap: no error grows along the run
    k = np.concatenate([[0.0], np.cumsum(np.round(gaps / np.median(gaps)))])
    period, phase = np.polyfit(k, mid, 1)
    ticks = phase + period * k
    return ticks, np.diff(np.array(values[1:len(ticks) + 1], dtype=float)) * 1e-3, period


def shares(data):
    """Per burst split between two refreshes: (s before the earlier one, its share); and the
    idle power, its noise per interval, and the refresh period."""
    ticks, energy, period = counter_intervals(data["reads"])
    mids = np.array([t0 + d / 2 for t0, d in data["bursts"]])
    starts, ends = ticks[:-1], ticks[1:]
    owner = [np.flatnonzero((mids > a - EDGE_S[0]) & (mids < b + EDGE_S[1])) for a, b in zip(starts, ends)]
    idle = np.array([e / (b - a) for e, a, b, o in zip(energy, starts, ends, owner) if len(o) == 0])
    p_idle = float(np.median(idle))
    noise = float(np.std(idle * period))
    excess = energy - p_idle * (ends - starts)
    points = []
    for b, m in enumerate(mids):
        ks = [k for k, o in enumerate(owner) if b in o]
        if len(ks) != 2 or ks[1] != ks[0] + 1:
            continue
        total = excess[ks[0]] + excess[ks[1]]
        if total > 5 * noise:
            points.append((ends[ks[0]] - m, excess[ks[0]] / total, total))
    return points, p_idle, noise, period


def response(s, lag, window, duration):
    """Share of a burst of `duration` centred s (seconds, scalar or array) before a refresh that
    the refresh counts."""
    t = np.asarray(s, dtype=float)[..., None] + np.linspace(-duration / 2, duration / 2, 9)
    if window <= 0:
        return np.mean(t >= lag, axis=-1)
    return np.mean(np.clip((t - lag + window / 2) / window, 0.0, 1.0), axis=-1)


def summary(data):
    points, p_idle, noise, period = shares(data)
    durations = [d for _, d in data["bursts"]]
    lines = [f"counter_kernel: {len(data['bursts'])} bursts of {np.median(durations) * 1e3:.1f} ms,"
             f" refresh period {period * 1e3:.3f} ms, idle {p_idle:.1f} W (sd {noise:.2f} J per"
             f" interval), {len(points)} bursts split between two refreshes"]
    if len(points) < 10:
        return "\n".join(lines + ["counter_kernel: too few split bursts to fit a response"])
    s, share = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    d = float(np.median(durations))

    def rms(lag, window):
        return float(np.sqrt(np.mean((share - response(s, lag, window, d)) ** 2)))

    _, lag, window = min((rms(lag, w), lag, w) for lag in np.arange(0.0, 0.0405, 0.0005)
                         for w in np.arange(0.0, 0.0605, 0.002))
    lines.append(f"counter_kernel: best response lag {lag * 1e3:.1f} ms, window {window * 1e3:.0f} ms"
                 f" (rms {rms(lag, window):.3f}); the client's lag {LAG_S * 1e3:.0f} ms and"
                 f" window {WINDOW_S * 1e3:.0f} ms: rms {rms(LAG_S, WINDOW_S):.3f}")
    for lo in np.arange(-0.016, 0.060, 0.004):
        sel = (s >= lo) & (s < lo + 0.004)
        if sel.any():
            lines.append(f"  s {lo * 1e3:+5.0f}..{(lo + 0.004) * 1e3:+3.0f} ms: share counted"
                         f" {np.mean(share[sel]):.2f} (n {int(sel.sum())}, model"
                         f" {response(lo + 0.002, lag, window, d):.2f})")
    return "\n".join(lines)


def main():
    if sys.argv[1] == "--summary":
        with open(sys.argv[2]) as f:
            print(summary(json.load(f)))
        return
    data = measure()
    with open(sys.argv[1], "w") as f:
        json.dump(data, f)
    print(summary(data), flush=True)


if __name__ == "__main__":
    main()
