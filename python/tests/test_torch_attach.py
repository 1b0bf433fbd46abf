"""perseus.torch.attach on real torch.distributed.pipelining: 4 CPU processes (gloo) per run, each
rank's schedule object built by torch, a real `perseus serve`, and the simulated GPU.

For every schedule class torch has (and a runtime schedule loaded from CSV): the job registers
torch's own order, the server plans for it, and the instructions each rank's hooks report are, in
order, the actions torch's pipeline_order lists for that rank (labels, stages, microbatches, count
per iteration); the client follows the served schedule without a departure. Training with Perseus
attached, or detached and attached again every iteration, is bitwise identical to training without
it."""

import json
import os
import subprocess
import sys

import pytest

from server_support import get_json, server_no_schedule  # noqa: F401  (a fixture)

torch = pytest.importorskip("torch")
pipelining = pytest.importorskip("torch.distributed.pipelining")

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "torch_pipeline")
sys.path.insert(0, EXAMPLE)
from pipeline import available_schedules  # noqa: E402

RANKS, MICROBATCHES, ITERATIONS = 4, 8, 4


def run_example(tmp_path, *extra, name="run"):
    """Runs examples/torch_pipeline/train.py; returns {rank: its rankN.json}."""
    out = tmp_path / name
    out.mkdir()
    cmd = [sys.executable, os.path.join(EXAMPLE, "train.py"), "--ranks", str(RANKS),
           "--microbatches", str(MICROBATCHES), "--batch-size", str(2 * MICROBATCHES),
           "--iterations", str(ITERATIONS), "--layers", "8", "--d-model", "16", "--seq", "8",
           "--report-every", "2", "--quiet", "--result-dir", str(out), *extra]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
    results = {}
    for r in range(RANKS):
        with open(out / f"rank{r}.json") as f:
            results[r] = json.load(f)
    return results, res.stderr


def single_actions(order):
    """An order's actions one by one: an overlapped "(0F3;3B1)OVERLAP_F_B" as its two actions."""
    out = []
    for action in order:
        if action.startswith("("):
            out.extend(action[1:action.index(")")].split(";"))
        else:
            out.append(action)
    return out


def looped_csv(ranks, microbatches):
    """A compute-only order in torch's notation that no schedule class builds: ``ranks`` x 2 looped
    stages, each rank running all forwards of its first stage, then of its second, then the
    backwards of its second stage, then of its first (microbatches ascending throughout)."""
    rows = []
    for r in range(ranks):
        a, b = r, r + ranks
        rows.append([f"{a}F{m}" for m in range(microbatches)] +
                    [f"{b}F{m}" for m in range(microbatches)] +
                    [f"{b}B{m}" for m in range(microbatches)] +
                    [f"{a}B{m}" for m in range(microbatches)])
    return "".join(",".join(row) + "\n" for row in rows)


SCHEDULES = available_schedules() + ["csv"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_rank_reports_torchs_own_order(schedule, server_no_schedule, perseus_bin,
                                             tmp_path):
    extra = ["--schedule", schedule, "--server", server_no_schedule, "--perseus", perseus_bin]
    if schedule == "csv":
        csv = tmp_path / "order.csv"
        csv.write_text(looped_csv(RANKS, MICROBATCHES))
        extra += ["--csv", str(csv)]
    results, stderr = run_example(tmp_path, *extra)
    job_ids = {r["job_id"] for r in results.values()}
    assert len(job_ids) == 1 and "" not in job_ids, job_ids
    for rank, r in results.items():
        want = single_actions(r["rank_order"])
        assert want, f"rank {rank}: torch's order is empty"
        assert len(r["seen"]) == ITERATIONS
        for it, seen in enumerate(r["seen"]):
            assert seen == want, f"rank {rank} iteration {it}:\n{seen}\n!=\n{want}"
        # The server planned for that order and the client followed it throughout.
        assert r["round"] >= 0, f"rank {rank} got no schedule:\n{stderr}"
        assert r["mismatched_iterations"] == 0, stderr
        assert not r["degraded"], stderr
    job = get_json(f"{server_no_schedule}/jobs/{job_ids.pop()}")
    assert job["state"] in ("running", "done"), job
    assert "warning" not in stderr, stderr


def test_training_is_bitwise_identical_with_and_without_perseus(server_no_schedule, perseus_bin,
                                                                tmp_path):
    common = ["--schedule", "interleaved-zero-bubble", "--perseus", perseus_bin]
    bare, _ = run_example(tmp_path, *common, "--no-perseus", name="bare")
    attached, _ = run_example(tmp_path, *common, "--server", server_no_schedule, name="attached")
    # Detached with keep_optimizer=True and attached again with optimizer= every iteration.
    alternating, stderr = run_example(tmp_path, *common, "--server", server_no_schedule,
                                      "--alternate", "1", name="alternating")
    for rank in range(RANKS):
        for run in (attached, alternating):
            assert run[rank]["digest"] == bare[rank]["digest"], f"rank {rank}'s parameters"
            assert run[rank]["losses"] == bare[rank]["losses"], f"rank {rank}'s losses"
        alt = alternating[rank]
        assert alt["attached"] == [True, False] * (ITERATIONS // 2), alt["attached"]
        want = single_actions(alt["rank_order"])
        assert alt["seen"] == [want] * (ITERATIONS // 2), f"rank {rank}: {alt['seen']}"
        assert alt["round"] >= 0 and not alt["degraded"], stderr
    assert len({r["job_id"] for r in alternating.values()}) == 1
    last = [r for r in bare.values() if r["losses"]]
    assert len(last) == 1 and len(last[0]["losses"]) == ITERATIONS
    assert last[0]["losses"][-1] < last[0]["losses"][0], "the model did not learn"
