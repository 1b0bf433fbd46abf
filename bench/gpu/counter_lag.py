"""How long a real GPU's energy counter trails the energy it reports, from recorded windows
(tests/data/h100_attribution_*.json by default): for every window with pipeline bubbles (their
idle edges pin the timing down), the lag in 0-25 ms that best fits a least-squares model of the
counter intervals (one busy power, idle inside iterations, time outside them) with each
interval's activity taken that much earlier. Prints each window's best lag and how much worse
no lag fits, then the median; perseus.NVML_COUNTER_LAG_S is that median.

Usage: /usr/bin/python3 bench/gpu/counter_lag.py [traces.json ...]
"""
import glob
import json
import os
import statistics
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LAGS_S = [i * 0.001 for i in range(26)]


def occupancy(trace):
    """f(a, b): seconds busy, idle inside iterations and outside them over [a, b]."""
    spans = np.array(trace["spans"])[:, :2]
    iterations = np.array(trace["iterations"])

    def overlap(rows, a, b):
        return np.clip(np.minimum(b, rows[:, 1]) - np.maximum(a, rows[:, 0]), 0, None).sum()

    def f(a, b):
        busy, inside = overlap(spans, a, b), overlap(iterations, a, b)
        return [busy, max(0.0, inside - busy), max(0.0, (b - a) - inside)]
    return f


def residual(trace, lag_s):
    """Residual sum of squares (J^2) of the model with the counter taken back by lag_s."""
    f = occupancy(trace)
    end = trace["iterations"][-1][1]
    rows, energy = [], []
    for (a, ea), (b, eb) in zip(trace["counter"], trace["counter"][1:]):
        if a >= trace["known_from_s"] and b <= end:
            rows.append(f(a - lag_s, b - lag_s))
            energy.append(eb - ea)
    x, y = np.array(rows), np.array(energy)
    x = x[:, x.sum(axis=0) > 1e-6]
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(((y - x @ beta) ** 2).sum())


def main(paths):
    best = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for case, value in sorted(data.items()):
            if not case.startswith("microbatch_"):
                continue
            trace = value["orders"]["1f1b_bubbles"]["trace"]
            rss = [residual(trace, lag) for lag in LAGS_S]
            i = int(np.argmin(rss))
            best.append(LAGS_S[i])
            print(f"{os.path.basename(path):36} {case:14} best lag {1e3 * LAGS_S[i]:4.0f} ms,"
                  f" no lag fits {rss[0] / rss[i]:.2f}x worse")
    print(f"median {1e3 * statistics.median(best):.0f} ms over {len(best)} windows"
          f" (range {1e3 * min(best):.0f}-{1e3 * max(best):.0f} ms)")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(glob.glob(os.path.join(ROOT, "tests", "data",
                                                       "h100_attribution_*.json"))))
