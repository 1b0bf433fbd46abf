"""How long a real GPU's energy counter trails the energy it reports, from recorded windows
(tests/data/h100_attribution_*.json by default): for every window with pipeline bubbles (their
idle edges pin the timing down), the lag in 0-25 ms that best fits a least-squares model of the
counter intervals (one busy power, idle inside iterations, time outside them) with each
interval's activity taken that much earlier. Prints each window's best lag and how much worse
no lag fits, then the median; perseus.NVML_COUNTER_LAG_S is that median.

--smear also lets each change average the power over a window of 0-60 ms around that time (a
counter that smooths as well as lags), with one power per instruction, and prints the best
(lag, width) per window with the forward's and backward's fitted power against the truth: an
open question of issue 11 (README "Measuring energy").

Usage: /usr/bin/python3 bench/gpu/counter_lag.py [--smear] [traces.json ...]
"""
import glob
import json
import os
import statistics
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LAGS_S = [i * 0.001 for i in range(26)]
WIDTHS_S = (0.0, 0.01, 0.02, 0.03, 0.04, 0.06)


def occupancy(trace, per_key):
    """f(a, b): seconds busy (per key, or in all), idle inside iterations and outside them."""
    spans = np.array(trace["spans"])
    iterations = np.array(trace["iterations"])
    keys = range(len(trace["keys"])) if per_key else (None,)

    def overlap(rows, a, b):
        return np.clip(np.minimum(b, rows[:, 1]) - np.maximum(a, rows[:, 0]), 0, None)

    def f(a, b):
        busy = overlap(spans, a, b)
        inside = overlap(iterations, a, b).sum()
        by_key = [busy.sum() if k is None else busy[spans[:, 2] == k].sum() for k in keys]
        return by_key + [max(0.0, inside - busy.sum()), max(0.0, (b - a) - inside)]
    return f


def fitted(trace, lag_s, width_s=0.0, per_key=False):
    """(residual sum of squares in J^2, powers) of the model with each change taken back by
    lag_s and averaged over width_s around that time."""
    f = occupancy(trace, per_key)
    end = trace["iterations"][-1][1]
    shifts = np.linspace(-width_s / 2, width_s / 2, 9) if width_s > 0 else (0.0,)
    rows, energy = [], []
    for (a, ea), (b, eb) in zip(trace["counter"], trace["counter"][1:]):
        if a >= trace["known_from_s"] + width_s and b <= end:
            rows.append(np.mean([f(a - lag_s - d, b - lag_s - d) for d in shifts], axis=0))
            energy.append(eb - ea)
    x, y = np.array(rows), np.array(energy)
    used = x.sum(axis=0) > 1e-6
    beta, *_ = np.linalg.lstsq(x[:, used], y, rcond=None)
    powers = np.zeros(x.shape[1])
    powers[used] = beta
    return float(((y - x[:, used] @ beta) ** 2).sum()), powers


def bubble_windows(paths):
    """(file, case, case's data) with its bubble order's trace as the client samples now: runs
    a and b kept their first read as a counter change (test_real_gpu_traces.py drops it too)."""
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for case, value in sorted(data.items()):
            if case.startswith("microbatch_"):
                trace = value["orders"]["1f1b_bubbles"]["trace"]
                if data.get("first_read_is_a_change", True):
                    trace["counter"] = trace["counter"][1:]
                yield os.path.basename(path), case, value


def lags(paths):
    best = []
    for name, case, value in bubble_windows(paths):
        rss = [fitted(value["orders"]["1f1b_bubbles"]["trace"], lag)[0] for lag in LAGS_S]
        i = int(np.argmin(rss))
        best.append(LAGS_S[i])
        print(f"{name:36} {case:14} best lag {1e3 * LAGS_S[i]:4.0f} ms,"
              f" no lag fits {rss[0] / rss[i]:.2f}x worse")
    print(f"median {1e3 * statistics.median(best):.0f} ms over {len(best)} windows"
          f" (range {1e3 * min(best):.0f}-{1e3 * max(best):.0f} ms)")


def smear(paths):
    for name, case, value in bubble_windows(paths):
        trace, truth = value["orders"]["1f1b_bubbles"]["trace"], value["truth"]
        fits = [(*fitted(trace, lag, width, per_key=True), lag, width)
                for lag in LAGS_S[::2] for width in WIDTHS_S]
        best = min(fits, key=lambda fit: fit[0])
        lag_only = min((fit for fit in fits if fit[3] == 0.0), key=lambda fit: fit[0])

        def text(fit):
            rss, powers, lag, width = fit
            errors = [100 * (powers[k] * truth[f"{key['name']}_s"] / truth[f"{key['name']}_j"] - 1)
                      for k, key in enumerate(trace["keys"])]
            return (f"lag {1e3 * lag:2.0f} ms width {1e3 * width:2.0f} ms rss {rss:7.1f} "
                    + " ".join(f"{key['name']} {e:+.1f} %" for key, e in zip(trace["keys"], errors)))
        print(f"{name:36} {case:14} {text(best)} | lag only: {text(lag_only)}")


if __name__ == "__main__":
    args = sys.argv[1:]
    mode = smear if args[:1] == ["--smear"] else lags
    args = args[1:] if mode is smear else args
    mode(args or sorted(glob.glob(os.path.join(ROOT, "tests", "data", "h100_attribution_*.json"))))
