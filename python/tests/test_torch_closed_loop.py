"""The closed loop on a real torch.distributed.pipelining job (examples/torch_pipeline/
closed_loop.py): 4 CPU processes with paced simulated GPUs under the instruction profiler write a
profile; `perseus plan` plans for the order torch registered; the frontier's plans, served by a
real server, are followed: every instruction ran at the clock the plan gave it (the simulated
GPU's own record). Timing figures are not asserted here (bench/torch_closed_loop.sh prints them)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch.distributed.pipelining")

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "..", "..", "examples", "torch_pipeline", "closed_loop.py")


def test_profile_plan_and_served_plans_are_followed(perseus_bin, tmp_path):
    out = tmp_path / "loop"
    cmd = [sys.executable, LOOP, "--out", str(out), "--perseus", perseus_bin,
           "--microbatches", "4", "--iterations", "6", "--time-scale", "0.3",
           "--min-frequency", "1290", "--train-args", "--d-model 16 --seq 8 --layers 4"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    summary = json.loads((out / "summary.json").read_text())
    profile = out / summary["job_profile"] / "profile.csv"
    rows = profile.read_text().splitlines()
    # 4 stages x (forward, backward) x 9 clocks (1410..1290), every one measured.
    assert len(rows) - 1 == 4 * 2 * 9, rows[:3]
    assert 0 < summary["blocking_power_w"]
    runs = summary["runs"]
    for name in ("fastest", "min-energy"):
        run = runs[name]
        assert run["instructions_planned"] > 0, run
        assert run["clocks_followed"] == run["instructions_planned"], run
        assert run["mismatched_iterations"] == 0, run
    assert runs["min-energy"]["planned_saving_pct"] > runs["fastest"]["planned_saving_pct"] > 0
    assert runs["min-energy"]["saving_pct"] > 0, runs
    assert (out / "report.html").stat().st_size > 0
