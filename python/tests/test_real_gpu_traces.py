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


def as_sampled_now(trace):
    """These windows were written by a sampler that kept its first read as a counter change, at
    the read's own time (just after the window began). That read returns the refresh before it,
    up to 100 ms old, so the sampler now starts at the first change; this drops that read."""
    t = copy.deepcopy(trace)
    assert t["counter"][0][0] > t["known_from_s"], "the first entry is not the first read"
    t["counter"] = t["counter"][1:]
    return t


def windows():
    """(file, data, microbatch, order, trace) of every recorded window, as sampled now."""
    for name in FILES:
        with open(os.path.join(DATA, name)) as f:
            data = json.load(f)
        for mb in (1, 4, 8):
            for order in ORDERS:
                yield name, data, mb, order, data[f"microbatch_{mb}"]["orders"][order]["trace"]


def steady(trace):
    """The trace without its first iteration (the allocator's warm-up in run a)."""
    t = copy.deepcopy(trace)
    start = t["iterations"][1][0]
    t["iterations"] = t["iterations"][1:]
    t["spans"] = [s for s in t["spans"] if s[0] >= start]
    t["known_from_s"] = start
    return t


def measured(data, trace):
    """The window as attributed: as sampled now, without run a's warm-up iteration."""
    trace = as_sampled_now(trace)
    return steady(trace) if data["first_iteration_is_warmup"] else trace


def errors(method):
    """{(file, microbatch, order, instruction): relative error in %} of the mean energy."""
    out = {}
    for name, data, mb, order, trace in windows():
        a = perseus.attribute(measured(data, trace), method)
        assert a["method"] == method
        for key in a["keys"]:
            truth = data[f"microbatch_{mb}"]["truth"][key["name"] + "_j"]
            out[(name, mb, order, key["name"])] = 100 * (key["mean_energy_j"] / truth - 1)
    return out


def worst(errs, microbatches):
    return max(abs(e) for (_, mb, _, _), e in errs.items() if mb in microbatches)


def test_busy_overlap_holds_on_every_real_window():
    errs = errors("busy-overlap")
    assert len(errs) == 2 * 3 * 3 * 2
    # Microbatch 4 and 8: forwards of 14-28 ms, backwards of 26-51 ms. Measured: 23 of 24 within
    # 5 %, worst 6.5 % (backward in the bubble order, run b); the truth itself moves 1-2 %
    # between runs (power-limited GPU, temperature), and backwards in the loop run 2-3 % longer
    # than packed (bench/gpu/README.md).
    assert worst(errs, (4, 8)) < 7.0
    assert sum(abs(e) < 5.0 for (_, mb, _, _), e in errs.items() if mb in (4, 8)) >= 23
    # Microbatch 1: 3.4 ms forwards, 7 ms backwards, 30 to a counter interval. Measured 6.8 %.
    assert worst(errs, (1,)) < 7.5


def first_span_power_ratio(trace):
    """busy-overlap's power of a window's first instruction over the median instruction's."""
    a = perseus.attribute(trace, "busy-overlap")
    powers = [e / (s[1] - s[0]) for e, s in zip(a["span_energy_j"], trace["spans"])]
    return powers[0] / sorted(powers)[len(powers) // 2]


def test_a_windows_first_instruction_is_not_charged_a_whole_refresh():
    # Kept as a change, the first read charged the first refresh's whole period of energy to the
    # part of it after the read: up to 6x the power on these windows.
    as_recorded = [first_span_power_ratio(trace) for *_, trace in windows()]
    assert max(as_recorded) > 3.0
    assert all(first_span_power_ratio(as_sampled_now(trace)) < 1.1 for *_, trace in windows())


@pytest.mark.parametrize("method, where", [
    ("overlap", "1f1b_bubbles"),  # spreads the bubbles' idle energy over the instructions
    ("fit", None),                # cannot tell forward from backward at one power in 6 s
    ("deltas", None),
])
def test_each_replaced_method_fails_the_same_windows(method, where):
    errs = errors(method)
    assert max(abs(e) for (_, _, order, _), e in errs.items()
               if where is None or order == where) > 10.0


def test_busy_overlaps_standard_error_stays_small_where_idle_is_unidentified():
    # Without bubbles, idle gaps of microseconds leave the fitted idle power at +-1e5 W. The
    # standard error carries the model's uncertainty, but bounded by the idle power's physical
    # range, so it stays near the counter's own (measured: at most 1.2 % for microbatch 4 and 8;
    # unbounded it reached 63 %, and a profiler waiting for 1 % would never stop).
    for name, data, mb, order, trace in windows():
        if mb == 1:
            continue
        for key in perseus.attribute(measured(data, trace), "busy-overlap")["keys"]:
            assert key["power_stderr_w"] < 0.02 * key["power_w"], (name, mb, order, key)
