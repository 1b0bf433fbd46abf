"""Median duration of each instruction of an order, by its position in the iteration, against
its back-to-back (packed truth) time: a truth-free view of the GPU's operating point. A GPU at
its power limit runs faster after an idle pipeline bubble and slows down as the limiter's
budget is spent, so instructions right after a bubble run shorter (and draw more) than in the
truth's steady state.

Usage: python3 bench/gpu/span_durations.py TRACES.json [...]
(traces.json of bench/gpu/run_on_device.sh, or tests/data/h100_attribution_*.json)
"""
import json
import statistics
import sys


def iterations_spans(trace, per_iteration):
    """The spans of each whole iteration of the trace (iterations with another count are left
    out)."""
    spans = sorted(trace["spans"])
    for begin, end in trace["iterations"]:
        inside = [s for s in spans if begin <= s[0] < end]
        if len(inside) == per_iteration:
            yield inside


def by_position(case, order_name):
    """'F-3.0 F-5.1 ...': each position's median span duration in % off its packed time."""
    recorded = case["orders"][order_name]
    order = recorded["order"].replace("I", "")
    durations = [[] for _ in order]
    for spans in iterations_spans(recorded["trace"], len(order)):
        for i, (begin, end, _) in enumerate(spans):
            durations[i].append(end - begin)
    packed = {"F": case["truth"]["forward_s"], "B": case["truth"]["backward_s"]}
    return " ".join(f"{kind}{100 * (statistics.median(d) / packed[kind] - 1):+.1f}"
                    for kind, d in zip(order, durations) if d)


def main(paths):
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        print(f"{path} ({data.get('device', '?')}): span duration by position, % off packed")
        for name, case in data.items():
            if not name.startswith("microbatch_"):
                continue
            for order_name in case["orders"]:
                print(f"  {name[len('microbatch_'):]:>2} {order_name:13s} "
                      f"{by_position(case, order_name)}")


if __name__ == "__main__":
    main(sys.argv[1:])
