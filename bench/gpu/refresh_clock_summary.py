"""Reads refresh_clock.py's JSON (argv[1]) and says, per phase (idle, load), whether one
refresh clock explains every counter change: each change's bracket (start of the last read that
returned the old value, end of the first that returned the new one), the period and phase that
best fit the brackets' midpoints, and how far the fitted refresh times fall outside their
brackets (0 for all: a clock of its own explains every change within the reads' resolution).
Also the intervals between bracket midpoints, as a sampler that times a change by its reads
sees them. Plain Python with numpy."""
import json
import sys

import numpy as np


def brackets(reads):
    out = []
    for a, b in zip(reads, reads[1:]):
        if a[2] is not None and b[2] is not None and a[2] != b[2]:
            out.append((a[0], b[1]))
    return np.array(out)


def fit_clock(br):
    """(period, each change's tick on the clock that best fits the brackets' midpoints, the
    midpoints). Each gap is counted in whole periods, so no error grows along a long run
    (dividing the time since the first change by the median gap put a change 60 periods on
    in the wrong period when that median was 100.3 ms)."""
    mid = br.mean(axis=1)
    gaps = np.diff(mid)
    k = np.concatenate([[0.0], np.cumsum(np.round(gaps / np.median(gaps)))])
    period, phase = np.polyfit(k, mid, 1)
    return period, phase + period * k, mid


def summary(name, reads):
    br = brackets(reads)
    if len(br) < 3:
        print(f"{name}: {len(br)} changes, too few")
        return
    period, fitted, mid = fit_clock(br)
    gaps = np.diff(mid)
    outside = np.maximum(br[:, 0] - fitted, fitted - br[:, 1]).clip(min=0)
    width = br[:, 1] - br[:, 0]
    cost = np.median([b[1] - b[0] for b in reads])
    print(f"{name}: {len(br)} changes, read {cost * 1e3:.2f} ms, brackets {np.median(width) * 1e3:.2f} ms"
          f" (max {width.max() * 1e3:.2f}); midpoint intervals {gaps.min() * 1e3:.1f}-{gaps.max() * 1e3:.1f} ms;"
          f" one clock: period {period * 1e3:.4f} ms, residual sd {np.std(mid - fitted) * 1e3:.2f} ms,"
          f" outside the bracket in {int((outside > 0).sum())} of {len(br)}"
          f" (max {outside.max() * 1e3:.2f} ms)")


def main():
    with open(sys.argv[1]) as f:
        data = json.load(f)
    for name, reads in data.items():
        summary(name, reads)


if __name__ == "__main__":
    main()
