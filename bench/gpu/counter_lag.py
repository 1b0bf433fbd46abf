"""How a real GPU's energy counter reports energy in time, from recorded windows
(tests/data/h100_attribution_*.json by default): a change observed at t holds the energy spent up
to t - lag, averaged over a window around that time (perseus.NVML_COUNTER_LAG_S and
NVML_COUNTER_WINDOW_S). For every window of a 1F1B stage (with and without pipeline bubbles,
whose idle edges pin the timing down), each (lag, window) pair is scored by the residual of the
`fit` attribution (least squares, one power per instruction, idle and outside; the changes timed
by the refresh clock where they fit one, each taken back by the lag and spread over the window)
relative to that window's best pair; the pairs are ranked by the geometric mean of that ratio
over the windows. No truth enters: the residual alone says which response fits the counter.

Prints the best pairs, the best among those that report no energy spent after the refresh
(window <= 2 x lag: a causal counter, and one the simulated GPU can model), each window's own
best, and the NVML constants' score.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/gpu/counter_lag.py [traces.json ...]
"""
import glob
import json
import math
import os
import sys

import perseus
from recorded_runs import as_sampled_now

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LAGS_S = [i * 0.001 for i in range(0, 21)]
WINDOWS_S = [0.0, 0.010, 0.015, 0.020, 0.025, 0.030, 0.040]
ORDERS = ("1f1b", "1f1b_bubbles")


def stage_windows(paths):
    """(name, trace as the client samples now) of every 1F1B window."""
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for case, value in sorted(data.items()):
            if not case.startswith("microbatch_"):
                continue
            for order in ORDERS:
                trace = as_sampled_now(data, value["orders"][order]["trace"])
                yield f"{os.path.basename(path)} {case} {order}", trace


def mean_square(trace, lag_s, window_s):
    """The fit's mean squared interval residual (J^2), or None where it fell back to overlap."""
    trace["counter_lag_s"], trace["counter_window_s"] = lag_s, window_s
    a = perseus.attribute(trace, "fit")
    return a["residual_rms_j"] ** 2 if a["method"] == "fit" else None


def main(paths):
    pairs = [(lag, w) for lag in LAGS_S for w in WINDOWS_S]
    scores = {pair: 0.0 for pair in pairs}
    counted = 0
    for name, trace in stage_windows(paths):
        fits = {pair: mean_square(trace, *pair) for pair in pairs}
        if any(v is None or v <= 0.0 for v in fits.values()):
            print(f"{name:60} skipped: the fit is not determined")
            continue
        best = min(fits, key=fits.get)
        print(f"{name:60} best lag {1e3 * best[0]:2.0f} ms window {1e3 * best[1]:2.0f} ms")
        counted += 1
        for pair, v in fits.items():
            scores[pair] += math.log(v / fits[best])
    score = {pair: math.exp(s / counted) for pair, s in scores.items()}

    def line(pair):
        return f"lag {1e3 * pair[0]:2.0f} ms window {1e3 * pair[1]:2.0f} ms: {score[pair]:.3f}"
    ranked = sorted(pairs, key=score.get)
    print(f"over {counted} windows, geometric mean of the residual over each window's best:")
    for pair in ranked[:3]:
        print("  best        " + line(pair))
    for pair in [p for p in ranked if p[1] <= 2 * p[0] + 1e-12][:3]:
        print("  causal      " + line(pair))
    nvml = (round(perseus.NVML_COUNTER_LAG_S, 3), round(perseus.NVML_COUNTER_WINDOW_S, 3))
    for pair in pairs:
        if (round(pair[0], 3), round(pair[1], 3)) == nvml:
            print("  NVML's      " + line(pair))
        if (round(pair[0], 3), pair[1]) == (0.008, 0.0):
            print("  lag alone   " + line(pair))


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(glob.glob(os.path.join(ROOT, "tests", "data",
                                                        "h100_attribution_*.json"))))
