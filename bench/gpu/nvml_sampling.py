"""What the real-GPU harness (attribution_on_gpu.py) samples beside the loop under test, on
threads of its own and with read-only NVML calls: the energy counter, and the SM clock with the
power cap's hold on it. A perseus.NvmlGpu read releases the GIL, so the training thread runs
meanwhile."""
import bisect
import threading
import time


def read(gpu):
    t0 = time.monotonic()
    e = gpu.total_energy()
    return 0.5 * (t0 + time.monotonic()), e


class OnItsThread:
    """Runs self._run on a thread of its own from entering the context to leaving it, which
    sets self._stop and waits for it."""

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Poller(OnItsThread):
    """Calls read() back to back on its own thread (NVML reads release the GIL), at most once
    every period_s, and keeps (the call's midpoint, its value)."""

    def __init__(self, read, period_s=0.0):
        super().__init__()
        self.read, self.period_s, self.samples = read, period_s, []

    def _run(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            value = self.read()
            t1 = time.monotonic()
            self.samples.append((0.5 * (t0 + t1), value))
            self._stop.wait(max(0.0, t0 + self.period_s - t1))


def counter_changes(samples):
    """The counter reads that returned a new value."""
    return [b for a, b in zip(samples, samples[1:]) if b[1] != a[1]]


CLOCK_PERIOD_S = 0.002  # nvmlDeviceGetClockInfo and the reasons cost ~10 us each on an H100


def clock_poller(gpu):
    """Samples the SM clock, whether the power cap holds it down, and the driver's power
    reading (all read-only)."""
    return Poller(lambda: (gpu.sm_clock_mhz(), "sw_power_cap" in gpu.clock_event_reasons(),
                           gpu.power_usage_w()), CLOCK_PERIOD_S)


def clocks_within(samples, intervals=None):
    """Mean SM clock, fraction of samples power-capped and mean power reading over the clock
    samples inside `intervals` (sorted (start, end) pairs; None: all samples)."""
    if intervals is not None:
        starts = [a for a, _ in intervals]
        inside = []
        for t, value in samples:
            i = bisect.bisect_right(starts, t) - 1
            if i >= 0 and t <= intervals[i][1]:
                inside.append((t, value))
        samples = inside
    n = len(samples)
    if n == 0:
        return {"samples": 0}
    return {"samples": n, "sm_mhz": sum(v[0] for _, v in samples) / n,
            "power_capped": sum(v[1] for _, v in samples) / n,
            "power_w": sum(v[2] for _, v in samples) / n}


def window_clocks(trace, samples):
    """The clocks during each instruction type's spans, and outside them (idle) within the
    window's iterations."""
    out = {}
    for index, key in enumerate(trace["keys"]):
        out[key["name"]] = clocks_within(samples, [(a, b) for a, b, k in trace["spans"]
                                                   if k == index])
    spans = sorted((a, b) for a, b, _ in trace["spans"])
    begin, end = trace["iterations"][0][0], trace["iterations"][-1][1]
    gaps = [(b, a) for (_, b), (a, _) in zip([(None, begin)] + spans, spans + [(end, None)])]
    out["idle"] = clocks_within(samples, [(a, b) for a, b in gaps if b > a])
    return out
