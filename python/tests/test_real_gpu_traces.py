"""Attribution on windows measured on real H100s (tests/data/h100_attribution_*.json, written by
bench/gpu/attribution_on_gpu.py, observe-only): each method's mean energy per forward and
backward against long-window truth. busy-overlap, the default, must hold on every window; each
method it replaced must fail somewhere, or these windows prove nothing."""

import copy
import json
import os

import pytest

import perseus

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data")
FILES = ("h100_attribution_a.json", "h100_attribution_b.json")
ORDERS = ("alternating", "1f1b", "1f1b_bubbles")


def steady(trace):
    """The trace without its first iteration (the allocator's warm-up in run a)."""
    t = copy.deepcopy(trace)
    start = t["iterations"][1][0]
    t["iterations"] = t["iterations"][1:]
    t["spans"] = [s for s in t["spans"] if s[0] >= start]
    t["known_from_s"] = start
    return t


def errors(method):
    """{(file, microbatch, order, instruction): relative error in %} of the mean energy."""
    out = {}
    for name in FILES:
        with open(os.path.join(DATA, name)) as f:
            data = json.load(f)
        for mb in (1, 4, 8):
            case = data[f"microbatch_{mb}"]
            for order in ORDERS:
                trace = case["orders"][order]["trace"]
                if data["first_iteration_is_warmup"]:
                    trace = steady(trace)
                a = perseus.attribute(trace, method)
                assert a["method"] == method
                for key in a["keys"]:
                    truth = case["truth"][key["name"] + "_j"]
                    out[(name, mb, order, key["name"])] = 100 * (key["mean_energy_j"] / truth - 1)
    return out


def worst(errs, microbatches):
    return max(abs(e) for (_, mb, _, _), e in errs.items() if mb in microbatches)


def test_busy_overlap_holds_on_every_real_window():
    errs = errors("busy-overlap")
    assert len(errs) == 2 * 3 * 3 * 2
    # Microbatch 4 and 8: forwards of 14-28 ms, backwards of 26-51 ms. Measured worst 6.4 %;
    # the truth itself moves 1-2 % between runs (power-limited GPU, temperature).
    assert worst(errs, (4, 8)) < 7.0
    assert sum(abs(e) < 5.0 for (_, mb, _, _), e in errs.items() if mb in (4, 8)) >= 20
    # Microbatch 1: 3.4 ms forwards, 7 ms backwards, 30 to a counter interval.
    assert worst(errs, (1,)) < 8.0


@pytest.mark.parametrize("method, where", [
    ("overlap", "1f1b_bubbles"),  # spreads the bubbles' idle energy over the instructions
    ("fit", None),                # cannot tell forward from backward at one power in 6 s
    ("deltas", None),
])
def test_each_replaced_method_fails_the_same_windows(method, where):
    errs = errors(method)
    assert max(abs(e) for (_, _, order, _), e in errs.items()
               if where is None or order == where) > 10.0
