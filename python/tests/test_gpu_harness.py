"""bench/gpu/attribution_on_gpu.py in its dry mode (CPU, a tiny model, the fake NVML at a constant
300 W): the harness a device session runs once has to work before GPU time is spent on it, and its
truths have to recover the power. The fake counter refreshes every 20 ms (1 ms reads) rather than
an H100's 100 ms, so that truths of 0.4 s and windows of 0.3 s see more refreshes (20 and 15)
than the dry run's own 1 s would at 100 ms (10), in less time."""

import json
import math
import os
import subprocess
import sys

import pytest

HARNESS = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu",
                       "attribution_on_gpu.py")
FAKE = os.environ.get("PERSEUS_FAKE_NVML", "")
FAKE_POWER_W = 300.0


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    pytest.importorskip("torch")
    if not os.path.isfile(FAKE):
        pytest.skip("PERSEUS_FAKE_NVML (the fake libnvidia-ml) not built")
    out = tmp_path_factory.mktemp("gpu")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML_")}
    env.update(PERSEUS_GPU_DRY="1", FAKE_NVML_POWER_W=str(FAKE_POWER_W), FAKE_NVML_REFRESH_MS="20",
               FAKE_NVML_READ_MS="1", PERSEUS_GPU_TRUTH_S="0.4", PERSEUS_GPU_WINDOW_S="0.3")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    run = subprocess.run([sys.executable, HARNESS, str(out / "attribution.json"),
                          str(out / "traces.json")], env=env, capture_output=True, text=True,
                         timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    with open(out / "attribution.json") as f, open(out / "traces.json") as g:
        return json.load(f), run.stdout, json.load(g)


def test_both_truths_recover_the_constant_power(dry_run):
    results, _, _ = dry_run
    for mb in (1, 4):
        case = results[f"microbatch_{mb}"]
        for name in ("truth", "looped_truth"):
            truth = case[name]
            pair_j = truth["forward_j"] + truth["backward_j"]
            pair_s = truth["forward_s"] + truth["backward_s"]
            for joules, seconds in ((truth["forward_j"], truth["forward_s"]), (pair_j, pair_s)):
                assert joules / seconds == pytest.approx(FAKE_POWER_W, rel=0.1), (mb, name)
            assert set(truth["drift_pct"]) == {"forward_j", "forward_s", "backward_j",
                                               "backward_s"}


def test_every_order_is_judged_by_every_method_against_both_truths(dry_run):
    results, stdout, _ = dry_run
    for mb in (1, 4):
        case = results[f"microbatch_{mb}"]
        for order in ("alternating", "1f1b", "1f1b_bubbles"):
            row = case[order]
            assert "error" not in row, row.get("error")
            assert row["hook_us"]["median"] > 0
            assert row["opened_uuid"] == "GPU-00000000-fa4e-4000-8000-000000000000"
            for method in ("busy-overlap", "fit", "overlap", "deltas"):
                for name in ("forward", "backward"):
                    for truth in ("packed", "looped"):
                        assert math.isfinite(row[method][name][f"{truth}_error_pct"])
    assert results["cuda_uuid"] is None  # no CUDA in the dry run: the device is mapped by index
    assert "busy-overlap against the packed truth:" in stdout
    assert "busy-overlap against the looped truth:" in stdout


def test_the_clocks_are_sampled_in_every_truth_and_every_instructions_spans(dry_run):
    results, stdout, _ = dry_run
    for mb in (1, 4):
        case = results[f"microbatch_{mb}"]
        for when in ("truth_before", "truth_after"):
            for truth in ("packed", "looped"):
                for clocks in case[when][truth]["clocks"].values():
                    assert clocks["samples"] > 50 and clocks["sm_mhz"] == 1410, (mb, when, truth)
                    assert clocks["power_capped"] == 0 and clocks["power_w"] == FAKE_POWER_W
        for order in ("alternating", "1f1b", "1f1b_bubbles"):
            clocks = case[order]["clocks"]
            for name in ("forward", "backward"):
                assert clocks[name]["samples"] > 20 and clocks[name]["sm_mhz"] == 1410
            # The client's own clock readings (beside its counter reads) agree.
            for name in ("forward", "backward"):
                client = case[order]["client_clocks"][name]
                assert client["samples"] > 5 and client["mean_mhz"] == 1410, (order, client)
                assert client["held_down_share"] == 0 and client["locked_mhz"] == 0
        # The bubbles are idle time between spans: sampled as idle, not as an instruction.
        idle = case["1f1b_bubbles"]["clocks"]["idle"]["samples"]
        assert idle > 20 and case["alternating"]["clocks"]["idle"]["samples"] < 0.1 * idle
        assert f"mb {mb} clocks 1f1b_bubbles: forward 1410 MHz (0 % capped)" in stdout


def load_span_durations():
    """bench/gpu/span_durations.py as a module."""
    sys.path.insert(0, os.path.dirname(HARNESS))
    try:
        import span_durations
    finally:
        sys.path.pop(0)
    return span_durations


def test_the_traces_carry_the_clocks_of_every_position(dry_run):
    _, _, traces = dry_run
    case = traces["microbatch_4"]
    clocks = load_span_durations().clocks_by_position(case, "1f1b_bubbles")
    assert clocks.split() == ["F1410/0%"] * 3 + ["F1410/0%", "B1410/0%"] * 5 + ["B1410/0%"] * 3


def test_span_durations_by_position_against_the_packed_time():
    span_durations = load_span_durations()
    # Two iterations of "F I B" (the bubble is no span); a third, cut short, is left out.
    spans = [[0.0, 0.011, 0], [0.05, 0.07, 1], [1.0, 1.012, 0], [1.05, 1.07, 1], [2.0, 2.01, 0]]
    case = {"truth": {"forward_s": 0.010, "backward_s": 0.040},
            "orders": {"bubbles": {"order": "FIB", "trace": {
                "spans": spans, "iterations": [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]]}}}}
    assert span_durations.by_position(case, "bubbles") == "F+15.0 B-50.0"
    assert span_durations.clocks_by_position(case, "bubbles") is None  # recorded without clocks
    # Clock samples [t, MHz, power-capped, W]: inside the forwards, the bubble, a backward.
    case["orders"]["bubbles"]["clocks"] = [[0.005, 1900, True, 700], [1.006, 1700, False, 690],
                                           [0.03, 1400, False, 120], [1.06, 1800, True, 700]]
    assert span_durations.clocks_by_position(case, "bubbles") == "F1800/50% B1800/100%"


def test_the_summary_counts_apart_the_instructions_that_ran_off_their_truths_clock():
    sys.path.insert(0, os.path.dirname(HARNESS))
    try:
        from attribution_summary import summary
    finally:
        sys.path.pop(0)
    def sampled(mhz):
        return {"samples": 9, "sm_mhz": mhz, "power_capped": 1.0, "power_w": 700.0}
    clocks = {"forward": sampled(1700.0), "pair": sampled(1700.0)}

    def order(forward_mhz, forward_error, backward_error):
        errors = {name: {"packed_error_pct": e, "looped_error_pct": e}
                  for name, e in (("forward", forward_error), ("backward", backward_error))}
        return {"clocks": {"forward": sampled(forward_mhz), "backward": sampled(1705.0)},
                "busy-overlap": errors}
    out = {"microbatch_4": {
        "truth": {"forward_s": 0.014, "backward_s": 0.026},
        "truth_before": {"packed": {"clocks": clocks}}, "truth_after": {"packed": {"clocks": clocks}},
        "alternating": order(1710.0, 1.0, -2.0),
        "1f1b": order(1690.0, 4.0, 3.0),
        "1f1b_bubbles": order(1800.0, 6.5, 2.0)}}  # forwards 5.9 % faster than their truth
    text = summary(out, (4,), ("alternating", "1f1b", "1f1b_bubbles"), ("packed", "looped"))
    assert "clock +5.9 % off the truth's" in text
    assert ("busy-overlap against the packed truth: 5 of 6 instructions of >= 10 ms within 5 %; "
            "of those at the truth's SM clock (within 1 %): 5 of 5") in text
