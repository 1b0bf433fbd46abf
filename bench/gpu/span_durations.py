"""Median duration of each instruction of an order, by its position in the iteration, against
its back-to-back (packed truth) time: a truth-free view of the GPU's operating point. A GPU at
its power limit runs faster after an idle pipeline bubble and slows down as the limiter's
budget is spent, so instructions right after a bubble run shorter (and draw more) than in the
truth's steady state. Where the traces carry the harness's clock samples (runs since they were
added), each position's mean SM clock and the share of its samples the power cap held follow.

Usage: python3 bench/gpu/span_durations.py TRACES.json [...]
(traces.json of bench/gpu/run_on_device.sh, or tests/data/h100_attribution_*.json)
"""
import json
import statistics
import sys

from nvml_sampling import clocks_within


def iterations_spans(trace, per_iteration):
    """The spans of each whole iteration of the trace (iterations with another count are left
    out)."""
    spans = sorted(trace["spans"])
    for begin, end in trace["iterations"]:
        inside = [s for s in spans if begin <= s[0] < end]
        if len(inside) == per_iteration:
            yield inside


def positions(recorded):
    """The order's instruction kinds and, per position, the spans of every whole iteration."""
    order = recorded["order"].replace("I", "")
    spans = [[] for _ in order]
    for iteration in iterations_spans(recorded["trace"], len(order)):
        for i, span in enumerate(iteration):
            spans[i].append(span)
    return order, spans


def by_position(case, order_name):
    """'F-3.0 F-5.1 ...': each position's median span duration in % off its packed time."""
    order, spans = positions(case["orders"][order_name])
    packed = {"F": case["truth"]["forward_s"], "B": case["truth"]["backward_s"]}
    return " ".join(
        f"{kind}{100 * (statistics.median(b - a for a, b, _ in s) / packed[kind] - 1):+.1f}"
        for kind, s in zip(order, spans) if s)


def clocks_by_position(case, order_name):
    """'F1755/80% ...': each position's mean SM clock (MHz) and share of power-capped samples
    over the clock samples inside its spans; None without clock samples."""
    recorded = case["orders"][order_name]
    if not recorded.get("clocks"):
        return None
    order, spans = positions(recorded)
    samples = [(t, sample) for t, *sample in recorded["clocks"]]  # [t, MHz, capped, W]
    out = []
    for kind, position_spans in zip(order, spans):
        c = clocks_within(samples, sorted((a, b) for a, b, _ in position_spans))
        if c["samples"]:
            out.append(f"{kind}{c['sm_mhz']:.0f}/{100 * c['power_capped']:.0f}%")
    return " ".join(out)


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
                clocks = clocks_by_position(case, order_name)
                if clocks:
                    print(f"  {'':>2} {'  SM clock':13s} {clocks}")


if __name__ == "__main__":
    main(sys.argv[1:])
