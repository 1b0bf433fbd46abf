"""bench/gpu/counter_kernel.py's analysis, on counters whose response is known: a refresh every
100 ms on a clock of its own, reads of 2.9-3.4 ms back to back (measured on H100s, see
bench/gpu/README.md), 70 W idle, bursts of 6 ms at 700 W, and a counter that counts energy spent
s before a refresh with probability clamp((s - lag + window / 2) / window, 0, 1). The device run
uses it once; it has to find the response it is given before GPU time is spent on it."""

import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu"))
import counter_kernel  # noqa: E402

IDLE_W, BURST_W, PERIOD_S = 70.0, 700.0, 0.1


def bursts(seconds, rng):
    out, t = [], 0.3
    while t < seconds:
        out.append((t, 0.006))
        t += 0.006 + rng.uniform(*counter_kernel.SPACING_S)
    return out


def counted(until, lag, window, burst_list):
    """Energy (J) a refresh at `until` has counted since time 0."""
    energy = IDLE_W * (until - lag)
    for start, duration in burst_list:
        mid = start + duration / 2
        share = counter_kernel.response(until - mid, lag, window, duration)
        energy += (BURST_W - IDLE_W) * duration * float(share)
    return energy


def synthetic(lag, window, seed=1, seconds=20.0, noise_j=0.1, phase_s=0.0371):
    rng = random.Random(seed)
    burst_list = bursts(seconds, rng)
    reads, now, value, tick = [], 0.0, None, phase_s
    while now < seconds + 0.3:
        t0, t1 = now, now + rng.uniform(0.0029, 0.0034)
        while tick <= 0.5 * (t0 + t1):
            value = int(1000 * (counted(tick, lag, window, burst_list) + rng.gauss(0, noise_j)))
            tick += PERIOD_S
        reads.append([t0, t1, value])
        now = t1
    return {"reads": reads, "bursts": burst_list}


@pytest.mark.parametrize("lag, window", [(0.010, 0.020), (0.005, 0.0), (0.015, 0.040)])
def test_finds_the_response_it_is_given(lag, window):
    lines = counter_kernel.summary(synthetic(lag, window)).splitlines()
    assert "refresh period 100.000 ms" in lines[0]
    best = lines[1].split("best response lag ")[1]
    found_lag = float(best.split(" ms")[0])
    found_window = float(best.split("window ")[1].split(" ms")[0])
    assert abs(found_lag - 1e3 * lag) <= 1.0, lines[1]
    assert abs(found_window - 1e3 * window) <= 4.0, lines[1]


def test_counts_the_periods_between_changes_so_no_error_grows_along_a_long_run():
    # 200 periods whose gaps' median is 100.3 ms: dividing the time since the first change by
    # that median puts a change 60 periods on in the wrong period.
    ticks, energy, period = counter_kernel.counter_intervals(synthetic(0.01, 0.02)["reads"])
    assert abs(period - PERIOD_S) < 1e-5
    assert np.all(np.abs(np.diff(ticks) - PERIOD_S) < 1e-5)
    assert len(energy) == len(ticks) - 1 and len(ticks) > 190


def test_says_so_when_no_burst_splits():
    data = synthetic(0.01, 0.02)
    data["bursts"] = data["bursts"][:3]
    assert "too few split bursts" in counter_kernel.summary(data)
