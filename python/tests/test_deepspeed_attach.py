"""perseus.deepspeed.attach on DeepSpeed's real PipelineEngine (deepspeed 0.19.8, CPU accelerator,
gloo; workers/deepspeed_ranks.py): 4 processes against a real server that plans for the order
DeepSpeed registered. Each rank's hooks report its TrainSchedule's forwards and backwards in
order, the client follows the served plan, eval_batch reports nothing, and detach gives the
engine back its class's instruction map."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import synth_profile
from server_support import server_no_schedule  # noqa: F401  (a fixture)

pytest.importorskip("deepspeed")

HERE = Path(__file__).resolve().parent
RANKS, ITERATIONS = 4, 4


def test_deepspeed_engine_reports_its_own_order(server_no_schedule, perseus_bin, tmp_path):
    profile = synth_profile(perseus_bin, RANKS, tmp_path / "profile.csv")
    out = tmp_path / "ds"
    out.mkdir()
    res = subprocess.run([sys.executable, str(HERE / "workers" / "deepspeed_ranks.py"),
                          server_no_schedule, profile, str(ITERATIONS), str(out)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "DS_ACCELERATOR": "cpu"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert "warning:" not in res.stderr, res.stderr
    jobs = set()
    for rank in range(RANKS):
        r = json.loads((out / f"rank{rank}.json").read_text())
        jobs.add(r["job_id"])
        # DeepSpeed's 1F1B: the stage's forwards and backwards, 4 micro-batches each.
        assert sorted(r["rank_order"]) == sorted(
            [f"{rank}F{m}" for m in range(4)] + [f"{rank}B{m}" for m in range(4)])
        assert r["seen"] == [r["rank_order"]] * ITERATIONS, rank
        assert r["round"] >= 0 and r["mismatched_iterations"] == 0 and not r["degraded"], r
        assert r["map_is_the_class_map"] is False  # attached: the instance has its own map
        assert (out / f"rank{rank}.detached").read_text() == "True"
    assert len(jobs) == 1 and "" not in jobs
