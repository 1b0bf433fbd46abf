#!/usr/bin/python3
"""Compares two frontier.csv files by evaluated energy at equal evaluated iteration time.

For each frontier, E(T) is the lowest evaluated energy among its plans that finish within T.
At every evaluated time of either frontier inside the common range, prints the mean and worst
relative difference (B - A) / A in percent, and the share of times where B is cheaper.
Usage: compare_frontiers.py A/frontier.csv B/frontier.csv
"""
import bisect
import csv
import sys


def envelope(path):
    with open(path) as f:
        pts = sorted((float(r["evaluated_time_s"]), float(r["evaluated_energy_j"]))
                     for r in csv.DictReader(f))
    times, best, lowest = [], [], float("inf")
    for t, e in pts:
        lowest = min(lowest, e)
        times.append(t)
        best.append(lowest)
    return times, best


def energy_at(env, t):
    times, best = env
    i = bisect.bisect_right(times, t * (1 + 1e-12)) - 1
    return best[i] if i >= 0 else None


def main():
    a, b = envelope(sys.argv[1]), envelope(sys.argv[2])
    lo, hi = max(a[0][0], b[0][0]), min(a[0][-1], b[0][-1])
    diffs = []
    for t in sorted(set(a[0] + b[0])):
        if lo <= t <= hi:
            ea, eb = energy_at(a, t), energy_at(b, t)
            diffs.append(100.0 * (eb - ea) / ea)
    better = sum(d < 0 for d in diffs) / len(diffs) * 100.0
    print(f"times={len(diffs)} mean_diff_pct={sum(diffs) / len(diffs):+.4f} "
          f"best_pct={min(diffs):+.4f} worst_pct={max(diffs):+.4f} b_cheaper_pct={better:.1f}")


if __name__ == "__main__":
    main()
