"""When a real GPU's energy counter counts the energy spent at a given moment, measured directly
and without any truth, read-only: short bursts of work (about 6 ms of bf16 matmuls), 200-260 ms
apart at random, while a thread reads nvmlDeviceGetTotalEnergyConsumption back to back; 25 s on
an otherwise idle GPU, then 25 s on one kept busy between the bursts by a one-block spin (if
energy the counter reports late there too, the lateness is the counter's, not a GPU slow to
return to idle after a burst). Each burst's GPU time comes from CUDA events,
each counter change's time from the refresh clock the changes fit (refresh_clock.py). A burst
whose energy the counter splits between two refreshes says which share of it the earlier
refresh counted; against the burst's distance s before that refresh, that share traces the
counter's response: the attribution's model (perseus.NVML_COUNTER_LAG_S and
NVML_COUNTER_WINDOW_S) says energy spent s before a refresh is counted by it with probability
clamp((s - lag + window / 2) / window, 0, 1). Issue 11: the lag and window were so far fitted
only to the residuals of training windows, where forward and backward differ by 25 % in power;
a burst against idle differs by about 8 times.

Writes JSON (per phase, reads and bursts) to argv[1] and prints the summary; `--summary FILE` prints it
again. PERSEUS_GPU_DRY=1 runs on the CPU against $PERSEUS_FAKE_NVML with sleeps for bursts.
Never changes a GPU setting."""
import contextlib
import json
import os
import random
import sys
import threading
import time

import numpy as np
from perseus import NVML_COUNTER_LAG_S as LAG_S, NVML_COUNTER_WINDOW_S as WINDOW_S

from nvml_sampling import OnItsThread
from refresh_clock import nvml, poll
from refresh_clock_summary import brackets, fit_clock

DRY = os.environ.get("PERSEUS_GPU_DRY") == "1"
SECONDS = 1.5 if DRY else 25.0
PHASES = ("idle", "busy")
BURST_S = 0.006
SPACING_S = (0.200, 0.260)
EDGE_S = (0.060, 0.015)  # a burst this far before / after an interval's ends may count in it


class Burst:
    """Runs about BURST_S of matmuls on a stream of its own. Their start times are read from
    CUDA events against two reference events, each recorded on the empty stream with the host
    times around it, so that neither the GIL nor the clocks' drift moves them."""

    def __init__(self):
        import torch
        self.torch = torch
        self.stream = torch.cuda.Stream()
        self.x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()  # x is made on the default stream
        self.count = 1
        self.run()  # cuBLAS's first call
        self.count = max(1, round(BURST_S / self.run()[1] * self.count))
        self.ref, self.starts = self.reference(), []

    def reference(self):
        event = self.torch.cuda.Event(enable_timing=True)
        t0 = time.monotonic()
        event.record(self.stream)
        event.synchronize()
        return event, 0.5 * (t0 + time.monotonic())

    def run(self):
        """(start event, duration in s) of one burst."""
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            start.record()
            for _ in range(self.count):
                self.x @ self.x
            end.record()
        end.synchronize()
        return start, start.elapsed_time(end) * 1e-3

    def times(self, runs):
        """[start in time.monotonic() seconds, duration] per run, mapped between the two
        references."""
        (first, t_first), (last, t_last) = self.ref, self.reference()
        scale = (t_last - t_first) / (first.elapsed_time(last) * 1e-3)
        return [[t_first + scale * first.elapsed_time(e) * 1e-3, d] for e, d in runs]


class Background(OnItsThread):
    """Keeps the GPU busy between bursts (phase "busy"): 1 ms spins of one thread block on a
    stream of its own, so the clocks have no idle to fall back in and the bursts' power steps
    up from a busy GPU's."""

    def __init__(self, torch):
        super().__init__()
        self.torch, self.stream = torch, torch.cuda.Stream()

    def _run(self):
        with self.torch.cuda.stream(self.stream):
            while not self._stop.is_set():
                for _ in range(4):
                    self.torch.cuda._sleep(2_000_000)  # about 1 ms at 1980 MHz
                self.stream.synchronize()


def measure_phase(lib, handle, busy):
    burst = None if DRY else Burst()
    reads, runs = [], []
    poller = threading.Thread(target=lambda: reads.extend(poll(lib, handle, SECONDS + 0.4)))
    background = Background(burst.torch) if busy and burst else contextlib.nullcontext()
    with background:
        poller.start()
        end = time.monotonic() + SECONDS
        time.sleep(0.2)
        while time.monotonic() < end:
            runs.append(burst.run() if burst else (time.monotonic(), BURST_S))
            time.sleep(random.uniform(*SPACING_S) + (BURST_S if DRY else 0.0))
        poller.join()
    return {"reads": reads, "bursts": burst.times(runs) if burst else runs}


def measure():
    lib, handle = nvml()
    return {phase: measure_phase(lib, handle, phase == "busy") for phase in PHASES}


def counter_intervals(reads):
    """(tick times on the fitted refresh clock, energy in J between consecutive ticks)."""
    br = brackets(reads)
    values, prev = [], None
    for r in reads:
        if r[2] is not None and r[2] != prev:
            values.append(r[2])
            prev = r[2]
    period, ticks, _ = fit_clock(br)
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


def exponential_response(s, dead_s, tau_s, duration):
    """The same share for a counter that counts energy spent s before a refresh with probability
    1 - exp(-(s - dead) / tau) past a dead time: a first-order filter, whose long tail a window
    cannot have."""
    t = np.asarray(s, dtype=float)[..., None] + np.linspace(-duration / 2, duration / 2, 9)
    return np.mean(np.where(t > dead_s, 1.0 - np.exp(-(t - dead_s) / tau_s), 0.0), axis=-1)


def summary(data):
    points, p_idle, noise, period = shares(data)
    durations = [d for _, d in data["bursts"]]
    lines = [f"counter_kernel: {len(data['bursts'])} bursts of {np.median(durations) * 1e3:.1f} ms,"
             f" refresh period {period * 1e3:.3f} ms, {p_idle:.1f} W between bursts (sd {noise:.2f} J"
             f" per interval), {len(points)} bursts split between two refreshes"]
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
    exp_rms, dead, tau = min(
        (float(np.sqrt(np.mean((share - exponential_response(s, dead, tau, d)) ** 2))), dead, tau)
        for dead in np.arange(-0.005, 0.0155, 0.0005) for tau in np.arange(0.001, 0.0405, 0.001))
    lines.append(f"counter_kernel: best first-order response dead time {dead * 1e3:.1f} ms, time"
                 f" constant {tau * 1e3:.0f} ms (rms {exp_rms:.3f})")
    for lo in np.arange(-0.016, 0.060, 0.004):
        sel = (s >= lo) & (s < lo + 0.004)
        if sel.any():
            lines.append(f"  s {lo * 1e3:+5.0f}..{(lo + 0.004) * 1e3:+3.0f} ms: share counted"
                         f" {np.mean(share[sel]):.2f} (n {int(sel.sum())}, model"
                         f" {response(lo + 0.002, lag, window, d):.2f}, first-order"
                         f" {exponential_response(lo + 0.002, dead, tau, d):.2f})")
    return "\n".join(lines)


def main():
    if sys.argv[1] == "--summary":
        with open(sys.argv[2]) as f:
            data = json.load(f)
    else:
        data = measure()
        with open(sys.argv[1], "w") as f:
            json.dump(data, f)
    phases = {"idle": data} if "reads" in data else data  # the first run had one phase
    for phase, measured in phases.items():
        print(f"counter_kernel, phase {phase}:")
        print(summary(measured), flush=True)


if __name__ == "__main__":
    main()
