"""perseus.megatron.attach on Megatron-core 0.16's real pipeline_parallel.schedules (CPU, no
pipeline; workers/megatron_rank.py): a training call through get_forward_backward_func() is one
iteration whose forward_step and backward_step calls are reported in Megatron's order and follow
the served plan; forward_only reports nothing; the interleaved driver is refused with the reason;
detach restores the module. Megatron's drivers allocate on CUDA, so the worker stands in for the
no-pipelining driver's loop; what makes the wrapping reach the real drivers is checked here on
their code: they look forward_step and backward_step up in the module at call time."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import synth_profile
from server_support import server_no_schedule  # noqa: F401  (a fixture)

schedules = pytest.importorskip("megatron.core.pipeline_parallel.schedules")

HERE = Path(__file__).resolve().parent


def global_names(function):
    """Every global name a function's code (nested functions included) looks up."""
    names, codes = set(), [function.__code__]
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    return names


@pytest.mark.parametrize("driver", ["forward_backward_no_pipelining",
                                    "forward_backward_pipelining_without_interleaving",
                                    "forward_backward_pipelining_with_interleaving"])
def test_megatron_drivers_look_the_steps_up_in_the_module(driver):
    names = global_names(getattr(schedules, driver))
    assert {"forward_step", "backward_step"} <= names
    assert driver in global_names(schedules.get_forward_backward_func)


def test_megatron_steps_are_reported_and_follow_the_plan(server_no_schedule, perseus_bin,
                                                        tmp_path):
    profile = synth_profile(perseus_bin, 1, tmp_path / "profile.csv")
    out = tmp_path / "megatron.json"
    res = subprocess.run([sys.executable, str(HERE / "workers" / "megatron_rank.py"),
                          server_no_schedule, profile, "4", str(out)], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-3000:]
    r = json.loads(out.read_text())
    order = ["0F0", "0B0", "0F1", "0B1", "0F2", "0B2", "0F3", "0B3"]
    assert r["rank_order"] == order
    assert r["seen"] == [order] * 4
    assert r["after_eval"] == order  # the forward-only call was not an iteration
    assert r["round"] >= 0 and r["mismatched_iterations"] == 0 and not r["degraded"], r
    assert "interleaved (virtual pipeline) schedule is not supported" in r["interleaved"]
    assert r["restored"] is True and r["grad"] > 0
