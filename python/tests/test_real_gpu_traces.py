"""Attribution on windows measured on real H100s (tests/data/h100_attribution_*.json, written by
bench/gpu/attribution_on_gpu.py, observe-only): each method's mean energy per forward and
backward against long-window truth. Runs a, b and c: bf16 transformer layers at the GPU's power
limit (forward and backward draw alike; in the bubble order the clock ran 10-19 % above the
truth's, run c). memory_bound: a model under the limit, every instruction at 1980 MHz in truth
and window alike, the forward drawing 25 % more than the backward: the one kind of run whose
truth describes its windows' operating point; memory_bound_2 repeated it on another GPU after
the method was chosen (held out); memory_bound_3 repeated it once more, the first run whose
counter changes carry their spread, held out from the refresh clock's timing; memory_bound_4
once more, held out to check the clock's timing once chosen. The counter's lag (10 ms) and
window (20 ms) were then fitted to the 36 1F1B windows recorded so far by their residuals alone,
never by a truth; memory_bound_5 and _6 were recorded after, on two more GPUs, held out. busy-overlap, the default, must hold where the counter can tell; each method it replaced
must fail somewhere, or these windows prove nothing. Where the counter cannot tell forward from
backward (alternating: its 20 ms window averages most of a forward and backward pair), the
pooling error says so: not solved (README)."""

import copy
import json
import os
import sys

import pytest

import perseus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu"))
import recorded_runs  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data")
TRANSFORMER = ("a", "b", "c")
ORDERS = ("alternating", "1f1b", "1f1b_bubbles")


def load(run):
    with open(os.path.join(DATA, f"h100_attribution_{run}.json")) as f:
        return json.load(f)


MEMORY_BOUND = ("memory_bound", "memory_bound_2", "memory_bound_3", "memory_bound_4",
                "memory_bound_5", "memory_bound_6")
RUNS = {run: load(run) for run in TRANSFORMER + MEMORY_BOUND}


def as_sampled_now(data, trace, window_s=perseus.NVML_COUNTER_WINDOW_S):
    """The window as the client attributes it now (recorded_runs.as_sampled_now). The runs
    recorded the counter's lag of their time (8 ms) or none; the NVML client now records its lag
    and window with each window."""
    t = recorded_runs.as_sampled_now(data, trace)
    t["counter_lag_s"] = perseus.NVML_COUNTER_LAG_S
    t["counter_window_s"] = window_s
    return t


def steady(trace):
    """The trace without its first iteration (the allocator's warm-up in run a)."""
    t = copy.deepcopy(trace)
    start = t["iterations"][1][0]
    t["iterations"] = t["iterations"][1:]
    t["spans"] = [s for s in t["spans"] if s[0] >= start]
    t["known_from_s"] = start
    return t


def measured(data, trace, window_s=perseus.NVML_COUNTER_WINDOW_S):
    """The window as attributed: as sampled now, without run a's warm-up iteration."""
    trace = as_sampled_now(data, trace, window_s)
    return steady(trace) if data["first_iteration_is_warmup"] else trace


def windows(runs):
    """(run, data, microbatch, order, trace) of every recorded window."""
    for run in runs:
        data = RUNS[run]
        for mb in sorted(int(k.split("_")[1]) for k in data if k.startswith("microbatch_")):
            for order in ORDERS:
                yield run, data, mb, order, data[f"microbatch_{mb}"]["orders"][order]["trace"]


def errors(method, runs, refresh_clock=True, window_s=perseus.NVML_COUNTER_WINDOW_S,
           truth="truth"):
    """{(run, microbatch, order, instruction): relative error in %} of the mean energy against
    the packed truth (or `truth="looped_truth"`)."""
    out = {}
    for run, data, mb, order, trace in windows(runs):
        a = perseus.attribute(measured(data, trace, window_s), method, refresh_clock=refresh_clock)
        assert a["method"] == method
        for key in a["keys"]:
            truth_j = data[f"microbatch_{mb}"][truth][key["name"] + "_j"]
            out[(run, mb, order, key["name"])] = 100 * (key["mean_energy_j"] / truth_j - 1)
    return out


def test_busy_overlap_holds_where_the_truth_describes_the_window():
    # Memory-bound, microbatch 8 and 16 (forwards of 12-24 ms, backwards of 13-26 ms), one clock
    # throughout. In the busy orders the counter intervals tell forward from backward: each gets
    # its own power, within 5 % (measured: worst 3.7 %; by the reads' times 3.5 %). Alternating,
    # every 100 ms interval holds the same share of each, so no counter-based method can: the
    # powers stay pooled, the forward 9-10 % low and the backward 12-15 % high (what the README
    # says is not solved).
    errs = errors("busy-overlap", ("memory_bound",))
    assert len(errs) == 2 * 3 * 2
    for run, data, mb, order, trace in windows(("memory_bound",)):
        split = perseus.attribute(measured(data, trace), "busy-overlap")["per_key_powers"]
        assert split == (order != "alternating"), (mb, order)
    busy = {k: e for k, e in errs.items() if k[2] != "alternating"}
    assert max(abs(e) for e in busy.values()) < 5.0
    by_reads = errors("busy-overlap", ("memory_bound",), refresh_clock=False)
    assert max(abs(e) for k, e in by_reads.items() if k[2] != "alternating") < 5.0


def test_a_pooled_power_says_how_far_each_instruction_may_be_from_it():
    # Alternating, the forward and backward keep one pooled power, 9-11 % low and 10-16 % high,
    # with standard errors of 0.1-1.1 %. Their pooling error (the per-key fit's disagreement and
    # variance; where that fit fails, the farthest the split may lie) is 15-102 %: the counter
    # cannot tell them apart, and it says so (measured: errors of 0.1-0.9 pooling errors). Split
    # keys have none.
    for run, data, mb, order, trace in windows(MEMORY_BOUND):
        a = perseus.attribute(measured(data, trace), "busy-overlap")
        for key in a["keys"]:
            truth_w = data[f"microbatch_{mb}"]["truth"][key["name"] + "_j"] * (
                key["occurrences"] / key["seconds"])
            error_w = abs(key["power_w"] - truth_w)
            if a["per_key_powers"]:
                assert key["pooling_stderr_w"] == 0.0
            if order == "alternating":
                assert key["pooling_stderr_w"] > 0.06 * truth_w, (run, mb, key["name"])
                assert error_w < key["pooling_stderr_w"], (run, mb, key["name"])
                assert error_w > 5 * key["power_stderr_w"], (run, mb, key["name"])


def test_the_refresh_clock_on_the_runs_with_spreads():
    # Runs 3 and 4, whose changes carry their spread: each window's 59-112 changes fit one clock
    # of 100.00 ms and each is timed by its tick; the counter intervals' residual falls by 20-65 %
    # (measured: 0.84-1.22 J to 0.43-0.75 J).
    for run, data, mb, order, trace in windows(("memory_bound_3", "memory_bound_4")):
        t = measured(data, trace)
        by_clock = perseus.attribute(t, "busy-overlap")
        by_reads = perseus.attribute(t, "busy-overlap", refresh_clock=False)
        assert abs(by_clock["refresh_period_s"] - 0.1) < 5e-5, (run, mb, order)
        assert by_clock["changes_on_clock"] == len(t["counter"]), (run, mb, order)
        assert by_clock["residual_rms_j"] < 0.85 * by_reads["residual_rms_j"], (run, mb, order)
        assert by_reads["refresh_period_s"] == 0.0


def test_the_runs_held_out_from_the_refresh_clock_and_after_it():
    # Run 3, recorded before the clock's timing was written: every instruction of the busy
    # orders within 5 % by the clock (measured: worst 2.4 %; by the reads' times 3.9 %). Run 4,
    # recorded after, to check it: microbatch 16 within 1.1 %, microbatch 8 (12-13 ms) within
    # 4.8 % but for the bubble order's backward, +5.12 % (by the reads' times all within 4.9 %),
    # its truth itself moving 1.7-2.4 % over the case; against the looped truth within 4.6 %.
    busy = lambda errs: {k: e for k, e in errs.items() if k[2] != "alternating"}
    assert max(abs(e) for e in busy(errors("busy-overlap", ("memory_bound_3",))).values()) < 3.0
    by_reads = busy(errors("busy-overlap", ("memory_bound_3",), refresh_clock=False))
    assert max(abs(e) for e in by_reads.values()) < 5.0
    run4 = busy(errors("busy-overlap", ("memory_bound_4",)))
    assert max(abs(e) for k, e in run4.items() if k[1] == 16) < 1.5
    assert [k for k, e in run4.items() if abs(e) >= 5.0] == [
        ("memory_bound_4", 8, "1f1b_bubbles", "backward")]
    assert max(abs(e) for e in run4.values()) < 5.2


def test_the_runs_held_out_after_each_interval_was_shared_by_the_counters_window():
    # Runs 5 and 6 (two more H100s), expected before each (bench/gpu/README.md): every
    # busy-order instruction within 5 % of the looped truth; of the packed truth all but at most
    # one microbatch-8 backward. Measured: run 5 all 8 within 3.7 % of the packed truth and
    # 2.7 % of the looped one; run 6 all 8 within 4.6 % of the looped truth, 7 of 8 of the packed
    # (microbatch 8's backwards +4.1 and +6.6 %, against the looped truth +0.4 and +2.9 %).
    busy = lambda errs: {k: e for k, e in errs.items() if k[2] != "alternating"}
    assert max(abs(e) for e in busy(errors("busy-overlap", ("memory_bound_5",))).values()) < 3.7
    looped = busy(errors("busy-overlap", ("memory_bound_5", "memory_bound_6"),
                         truth="looped_truth"))
    assert len(looped) == 16 and max(abs(e) for e in looped.values()) < 4.6
    run6 = busy(errors("busy-overlap", ("memory_bound_6",)))
    assert [k for k, e in run6.items() if abs(e) >= 5.0] == [
        ("memory_bound_6", 8, "1f1b_bubbles", "backward")]
    assert max(abs(e) for e in run6.values()) < 6.7
    # Alternating at microbatch 8 the per-key fit put the forward at -63 W: the counter bounds
    # the split only by what the pair spent, and the pooling error says so: about the pooled
    # power itself (measured: 94-102 % of it; it read 0 before).
    data = RUNS["memory_bound_5"]
    trace = measured(data, data["microbatch_8"]["orders"]["alternating"]["trace"])
    for key in perseus.attribute(trace, "busy-overlap")["keys"]:
        assert key["pooling_stderr_w"] > 0.9 * key["power_w"], key["name"]


def short_run_errors(response):
    """{(microbatch, order, instruction): % error against the looped truth} of the memory-bound
    run at microbatch 2 and 4, replayed with `response` (counter_lag_s, counter_window_s,
    counter_time_constant_s), and whether each window split forward from backward."""
    data = load("memory_bound_short")
    out, split = {}, {}
    for mb in (2, 4):
        case = data[f"microbatch_{mb}"]
        for order in ORDERS:
            trace = copy.deepcopy(case["orders"][order]["trace"])
            for name, value in zip(("counter_lag_s", "counter_window_s",
                                    "counter_time_constant_s"), response):
                trace[name] = value
            a = perseus.attribute(trace, "busy-overlap")
            split[(mb, order)] = a["per_key_powers"]
            for key in a["keys"]:
                truth = case["looped_truth"][key["name"] + "_j"]
                out[(mb, order, key["name"])] = 100 * (key["mean_energy_j"] / truth - 1)
    return out, split


def test_the_short_run_decided_the_counters_response_model():
    # Forwards of 3 and 6 ms, where the response's shape moves the split most. The rule written
    # before the run (bench/gpu/README.md): the first-order response (11.5 ms, measured with
    # bursts) replaces the 20 ms window if its mean absolute error over the busy-order
    # instructions against the looped truth is lower. Measured: 12.33 % against 12.28 %, so the
    # window stays. No window split forward from backward at these lengths: pooled, forwards 10-26 %
    # low, backwards up to 15 % high (not judged: under 10 ms).
    def busy_mae(errs):
        busy = [abs(e) for k, e in errs.items() if k[1] != "alternating"]
        return sum(busy) / len(busy)
    window, split = short_run_errors((0.010, 0.020, 0.0))
    first_order, _ = short_run_errors((0.0, 0.0, 0.0115))
    assert busy_mae(window) < busy_mae(first_order)
    assert not any(split.values())
    assert 5.0 < max(abs(e) for e in window.values()) < 30.0


def test_the_held_out_run():
    # Chosen on memory_bound, run on another GPU: microbatch 16's busy orders within 1.5 %;
    # microbatch 8's backwards high in both busy orders (the 1F1B +5.8 %, the bubble order +9.4 %,
    # its forward -3.4 %; against the looped truth +1.6 % and +5.0 %: the host's gaps after each
    # backward are part of it), what the README says is not solved.
    errs = errors("busy-overlap", ("memory_bound_2",))
    busy = {k: e for k, e in errs.items() if k[2] != "alternating"}
    assert max(abs(e) for k, e in busy.items() if k[1] == 16) < 1.5
    assert sum(abs(e) < 5.0 for e in busy.values()) == 6
    assert max(abs(e) for e in busy.values()) < 10.0


def test_busy_overlap_on_the_power_limited_transformer():
    errs = errors("busy-overlap", TRANSFORMER)
    assert len(errs) == 3 * 3 * 3 * 2
    judged = {k: e for k, e in errs.items() if k[1] in (4, 8)}
    # Microbatch 4 and 8: forwards of 14-28 ms, backwards of 26-51 ms. Every instruction within
    # 5 % in the orders without bubbles (measured: worst 3.9 %).
    assert max(abs(e) for k, e in judged.items() if k[2] != "1f1b_bubbles") < 5.0
    # In the bubble order the forwards after each bubble ran faster and drew more than the
    # truth's steady state; the counter tells forward from backward there and finds the forwards
    # 7.7-9.7 % above the truth, the backwards within 4.3 % (measured: worst 9.7 %).
    assert max(abs(e) for k, e in judged.items()) < 10.0
    assert sum(abs(e) < 5.0 for e in judged.values()) >= 30
    # Microbatch 1: 3.4 ms forwards, 7 ms backwards, 30 to a counter interval (measured 9.3 %,
    # the bubble order's backward).
    assert max(abs(e) for k, e in errs.items() if k[1] == 1) < 10.0


def test_the_bubble_orders_ran_faster_than_their_truth():
    # Why the transformer's bubble order is judged apart: run c sampled the SM clock, and there
    # every instruction ran at least 10 % above its packed truth's clock (the busy orders: 2-7 %),
    # so the truth does not describe those instructions. The memory-bound run stayed at one clock.
    for mb in (4, 8):
        case = RUNS["c"][f"microbatch_{mb}"]
        truth_mhz = case["truth_clocks"]["before"]["pair"]["sm_mhz"]
        bubbles = case["orders"]["1f1b_bubbles"]["clocks"]
        assert min(bubbles[k]["sm_mhz"] for k in ("forward", "backward")) > 1.10 * truth_mhz
    for mb in (8, 16):
        case = RUNS["memory_bound"][f"microbatch_{mb}"]
        for order in ORDERS:
            for clock in case["orders"][order]["clocks"].values():
                assert clock["sm_mhz"] == pytest.approx(
                    case["truth_clocks"]["before"]["pair"]["sm_mhz"], rel=0.01)


def first_span_power_ratio(trace):
    """busy-overlap's power of a window's first instruction over the median instruction's."""
    a = perseus.attribute(trace, "busy-overlap")
    powers = [e / (s[1] - s[0]) for e, s in zip(a["span_energy_j"], trace["spans"])]
    return powers[0] / sorted(powers)[len(powers) // 2]


def test_a_windows_first_instruction_is_not_charged_a_whole_refresh():
    # Kept as a change, the first read charged the first refresh's whole period of energy to the
    # part of it after the read: up to 6x the power on these windows.
    old = list(windows(("a", "b")))
    assert max(first_span_power_ratio(trace) for *_, trace in old) > 3.0
    assert all(first_span_power_ratio(as_sampled_now(data, trace)) < 1.1
               for _, data, _, _, trace in old)


def test_the_counters_lag_is_what_the_bubbles_edges_say():
    # Without the lag, the memory-bound bubble order splits worse (measured: worst 6.8 % against
    # 2.4 %) or not at all (12.7 % against 2.7 %): the bubbles' edges fall in the wrong intervals.
    for mb in (8, 16):
        data = RUNS["memory_bound"]
        case = data[f"microbatch_{mb}"]
        trace = measured(data, case["orders"]["1f1b_bubbles"]["trace"])
        def worst(lag):  # with the changes timed by their reads, as the lag was fitted
            trace["counter_lag_s"] = lag
            a = perseus.attribute(trace, "busy-overlap", refresh_clock=False)
            return max(abs(k["mean_energy_j"] / case["truth"][k["name"] + "_j"] - 1)
                       for k in a["keys"])
        assert worst(perseus.NVML_COUNTER_LAG_S) < 0.05
        assert worst(0.0) > 0.05


def test_the_counters_window_is_what_the_bubbles_edges_say():
    # A change averages the energy over 20 ms: on every memory-bound bubble window of the runs
    # it was chosen on the counter intervals' residual falls with it (measured: by 2-14 %), and
    # of their 32 busy-order instructions 3 miss 5 % with it, 6 without (against the looped truth
    # 1 and 3). Runs 5 and 6, held out: the residual by 1-12 %, except run 5's at microbatch 16,
    # 2.1 J either way (0.5 % less with it), three times any other window's; of all 48 busy-order
    # instructions 4 miss 5 % with it, 8 without.
    without, with_window = 0.0, perseus.NVML_COUNTER_WINDOW_S
    for run, data, mb, order, trace in windows(MEMORY_BOUND):
        if order == "1f1b_bubbles":
            residual = {w: perseus.attribute(measured(data, trace, w), "busy-overlap")
                        ["residual_rms_j"] for w in (without, with_window)}
            fall = 1.0 if (run, mb) == ("memory_bound_5", 16) else 0.98
            assert residual[with_window] < fall * residual[without], (run, mb)
    misses = {w: sum(abs(e) >= 5.0 for k, e in errors("busy-overlap", MEMORY_BOUND,
                                                      window_s=w).items() if k[2] != "alternating")
              for w in (without, with_window)}
    assert misses == {without: 8, with_window: 4}


@pytest.mark.parametrize("method, runs, where", [
    ("overlap", TRANSFORMER, "1f1b_bubbles"),  # spreads the bubbles' idle energy over them
    ("fit", TRANSFORMER, None),  # cannot tell forward from backward at one power in 6 s
    ("deltas", TRANSFORMER, None),
    ("overlap", ("memory_bound",), "1f1b"),  # one power per interval, forward or backward
    ("deltas", ("memory_bound",), "1f1b"),
])
def test_each_replaced_method_fails_the_same_windows(method, runs, where):
    errs = errors(method, runs)
    assert max(abs(e) for (_, _, order, _), e in errs.items()
               if where is None or order == where) > 10.0


def test_busy_overlaps_standard_error_stays_small_where_idle_is_unidentified():
    # Without bubbles, idle gaps of microseconds leave the fitted idle power at +-1e5 W. The
    # standard error carries the model's uncertainty, but bounded by the idle power's physical
    # range, so it stays near the counter's own (measured: at most 2.1 % for microbatch 4 and
    # up; unbounded it reached 63 %, and a profiler waiting for 1 % would never stop).
    for run, data, mb, order, trace in windows(TRANSFORMER + MEMORY_BOUND):
        if mb == 1:
            continue
        for key in perseus.attribute(measured(data, trace), "busy-overlap")["keys"]:
            assert key["power_stderr_w"] < 0.025 * key["power_w"], (run, mb, order, key)
