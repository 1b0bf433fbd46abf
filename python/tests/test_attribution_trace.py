"""Recorded reporting windows (opt.last_window_trace) and perseus.attribute."""

import json
import re

import pytest

import perseus
from conftest import train


def realistic(profile_path, **kw):
    """A simulated GPU with the realistic counter (100 ms refresh, 4 ms reads)."""
    return perseus.PipelineFrequencyOptimizer(
        0, 0, 0, 0, 0, 1, 2, 1, 2, None, gpu="sim", profile=profile_path, counter="realistic",
        report_every=kw.pop("report_every", 40), **kw)


def current_window_energies(window):
    """Span energies of the window in time order (iteration by iteration, then name order)."""
    per_iteration = {}
    for name, iterations in window["energy_breakdown"].items():
        for i, energies in enumerate(iterations):
            per_iteration.setdefault(i, []).extend(energies)
    return sorted(e for energies in per_iteration.values() for e in energies)


@pytest.mark.parametrize("method", ["busy-overlap", "fit", "overlap", "deltas"])
def test_a_recorded_window_attributes_again_to_the_same_energies(profile2, method):
    with realistic(profile2, attribution=method) as opt:
        train(opt, 40)
        window, trace = opt.last_window, opt.last_window_trace
    assert json.loads(json.dumps(trace)) == trace  # plain JSON data
    assert [k["name"] for k in trace["keys"]] == ["forward", "backward"]
    assert len(trace["iterations"]) == 40 and len(trace["spans"]) == 80
    assert len(trace["counter"]) > 10
    again = perseus.attribute(trace, method)
    assert again["method"] == window["attribution"]
    assert sorted(again["span_energy_j"]) == pytest.approx(current_window_energies(window),
                                                           rel=1e-12)
    assert again["iteration_energy_j"] == pytest.approx(window["iter_energy"], rel=1e-12)
    forward = again["keys"][0]
    assert forward["occurrences"] == 40
    assert forward["mean_energy_j"] == pytest.approx(
        sum(again["span_energy_j"][0::2]) / 40, rel=1e-9)
    # The window's pooling error of each instruction's mean energy: its key's, per occurrence.
    for key in again["keys"]:
        assert window["energy_pooling_error"][key["name"]] == pytest.approx(
            key["pooling_stderr_w"] * key["seconds"] / key["occurrences"], rel=1e-9, abs=1e-15)


def test_another_method_gives_other_energies_from_the_same_trace(profile2):
    with realistic(profile2) as opt:
        train(opt, 40)
        trace = opt.last_window_trace
    fit, deltas = perseus.attribute(trace, "fit"), perseus.attribute(trace, "deltas")
    assert fit["method"] == "fit" and deltas["method"] == "deltas"
    assert fit["span_energy_j"] != deltas["span_energy_j"]
    assert sum(fit["iteration_energy_j"]) == pytest.approx(sum(deltas["iteration_energy_j"]),
                                                           rel=0.05)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.pop("counter"), "field 'counter': missing"),
    (lambda t: t.update(version=2), "field 'version': must be 1"),
    (lambda t: t["spans"][1].__setitem__(2, 7), "field 'spans[1]': key must be the index"),
    (lambda t: t["spans"][3].__setitem__(1, t["spans"][3][0] / 2),
     "field 'spans[3]': ends before it begins"),
    (lambda t: t["counter"].reverse(), "field 'counter[1]': goes back in time or in energy"),
    (lambda t: t["iterations"][2].append(1.0), "field 'iterations[2]': must hold 2 numbers"),
    (lambda t: t["iterations"][0].__setitem__(0, t["spans"][0][1]),
     "field 'spans[0]': lies outside every iteration"),
    (lambda t: t["keys"][0].__setitem__("name", ""),
     "field 'keys[0].name': must be a non-empty string"),
])
def test_a_malformed_trace_is_refused_naming_the_field(profile2, change, message):
    with realistic(profile2, report_every=5) as opt:
        train(opt, 5)
        trace = opt.last_window_trace
    change(trace)
    with pytest.raises(perseus.PerseusError, match=re.escape(message)):
        perseus.attribute(trace)


def test_an_unknown_method_is_refused(profile2):
    with realistic(profile2, report_every=5) as opt:
        train(opt, 5)
        trace = opt.last_window_trace
    with pytest.raises(perseus.PerseusError, match="unknown attribution method 'best'"):
        perseus.attribute(trace, "best")
