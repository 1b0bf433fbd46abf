"""What instant_power.py's recording says, per case (model, order) and power source (the instant
and average fields polled, the driver's buffered samples): how often a new reading comes (median
time between the driver's timestamps) and how often its value changes, how late a polled reading
is seen after the driver's timestamp, and
whether the readings tell a forward from a backward: each reading taken as the power at its
timestamp minus a lag, the mean reading inside forwards and inside backwards, at no lag and at
the lag in 0..60 ms that sets them furthest apart (a reading that averages over a window longer
than an instruction shows the two alike at every lag).

    python3 bench/gpu/instant_power_summary.py instant_power.json
"""
import bisect
import json
import statistics
import sys

LAGS_MS = range(0, 61, 2)


def to_monotonic(case, driver_us):
    wall, mono = case["clocks"]
    return driver_us * 1e-6 - wall + mono


def readings(case):
    """{source: [(monotonic time of the driver's timestamp, watts)]}, and the polls' latencies."""
    out, latency = {"instant": [], "average": [], "buffered": []}, []
    if "clocks" not in case:
        return out, latency
    for seen, rc, values in case["samples"]:
        if rc != 0:
            continue
        for source, (stamp, ret, _kind, value) in zip(("instant", "average"), values):
            if ret == 0 and stamp:
                t = to_monotonic(case, stamp)
                out[source].append((t, value / 1000.0))
                latency.append(seen - t)
    out["buffered"] = [(to_monotonic(case, stamp), mw / 1000.0)
                       for stamp, mw in case.get("buffered", [])]
    for source in out:  # a polled reading repeats until the driver's next one
        out[source] = sorted(set(out[source]))
    return out, latency


def by_kind(spans, series, lag_s):
    """Mean reading inside forwards (kind 0) and backwards (kind 1), each reading placed at its
    time minus the lag."""
    starts = [s[0] for s in spans]
    sums = {0: [], 1: []}
    for t, watts in series:
        i = bisect.bisect_right(starts, t - lag_s) - 1
        if i >= 0 and spans[i][0] <= t - lag_s < spans[i][1]:
            sums[spans[i][2]].append(watts)
    return {k: (statistics.mean(v) if v else float("nan"), len(v)) for k, v in sums.items()}


def main():
    data = json.load(open(sys.argv[1]))
    print(f"device: {data['device']}")
    for case in data["cases"]:
        series, latency = readings(case)
        spans = sorted(case["spans"])
        pair_ms = 1e3 * statistics.median(b - a for a, b, _ in spans) if spans else 0.0
        print(f"{case['model']} / {case['order']}: {len(spans)} instructions "
              f"(median {pair_ms:.1f} ms), buffered samples rc {case.get('buffered_rc')}")
        if latency:
            print(f"  polled readings seen {1e3 * statistics.median(latency):.1f} ms (median) "
                  "after the driver's timestamp")
        for source, s in series.items():
            if len(s) < 2:
                print(f"  {source:8s}: {len(s)} readings")
                continue
            stamps = sorted({t for t, _ in s})
            period = statistics.median(b - a for a, b in zip(stamps, stamps[1:]))
            changes = [s[0][0]] + [b[0] for a, b in zip(s, s[1:]) if b[1] != a[1]]
            change = statistics.median(b - a for a, b in zip(changes, changes[1:])) \
                if len(changes) > 1 else float("nan")
            at = {lag: by_kind(spans, s, lag / 1e3) for lag in LAGS_MS}
            best = max(LAGS_MS, key=lambda lag: abs(at[lag][0][0] - at[lag][1][0])
                       if all(at[lag][k][1] for k in (0, 1)) else -1.0)
            fmt = lambda m: (f"forward {m[0][0]:.0f} W ({m[0][1]}), "
                             f"backward {m[1][0]:.0f} W ({m[1][1]})")
            print(f"  {source:8s}: {len(s)} readings, one every {1e3 * period:.1f} ms, a "
                  f"change every {1e3 * change:.1f} ms; "
                  f"lag 0: {fmt(at[0])}; lag {best} ms: {fmt(at[best])}")


if __name__ == "__main__":
    main()
