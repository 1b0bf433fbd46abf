"""Zeus configurations carry over (issue 51.8-12): Zeus's own server (zeus 0.16 on FastAPI) and
ours, given the same configuration, serve the same plans; our client against Zeus's server."""

import contextlib
import json
import subprocess

import pytest

from server_support import serve
from zeus_server import served_schedules, zeus_server

pytest.importorskip("zeus.optimizer.pipeline_frequency")


@contextlib.contextmanager
def running(server):
    """A server generator (serve, zeus_server) as a context: its URL, then it stops."""
    try:
        yield next(server)
    finally:
        server.close()


def zeus_rank_lists(stage_orders, clocks, stage_of_rank):
    """Zeus's PointSolution file: one list of (instruction, MHz) per rank."""
    lists = []
    for stage in stage_of_rank:
        pairs = [(name, clocks[stage]) for name in stage_orders[stage]]
        lists.append("[" + ", ".join(f'("{n}", {c})' for n, c in pairs) + "]")
    return "[\n" + ",\n".join(lists) + "\n]\n"


def test_a_per_rank_zeus_plan_with_data_parallel_copies_is_served_as_zeus_serves_it(
        perseus_bin, tmp_path):
    """51.8: Zeus's PointSolution file holds one list per rank; with 2 data-parallel copies of
    each of 2 stages (1F1B, 2 microbatches) both servers serve every rank the same plan. (Before,
    ours took the 4 lists for 4 stages and refused the file: "stage 2's instruction order is not
    that of 1f1b".)"""
    orders = [["forward", "forward", "backward", "backward"],
              ["forward", "backward", "forward", "backward"]]
    plan = tmp_path / "plan.py"
    plan.write_text(zeus_rank_lists(orders, [1395, 1365], stage_of_rank=[0, 0, 1, 1]))
    args = {"solution_path": str(plan)}
    with running(serve(perseus_bin, tmp_path, scheduler="point-solution",
                       scheduler_args=args)) as url:
        ours = served_schedules(url, pp=2, dp=2)
    with running(zeus_server(tmp_path, "PointSolution", args)) as url:
        zeus = served_schedules(url, pp=2, dp=2)
    for rank in range(4):
        assert ours[rank][0] == 200 and zeus[rank][0] == 200, (ours[rank], zeus[rank])
        theirs = [tuple(pair) for pair in zeus[rank][1]["frequencies"]]
        assert [tuple(pair) for pair in ours[rank][1]["frequencies"]] == theirs, rank
        assert theirs == [(name, [1395, 1365][rank // 2]) for name in orders[rank // 2]]


def test_a_zeus_configuration_with_an_absolute_plan_path_runs_unchanged(perseus_bin, tmp_path,
                                                                         monkeypatch):
    """51.9: Zeus's configuration (ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS) names its plan by
    an absolute path outside our --data-dir: the server refuses to start, saying which
    --data-dir runs it unchanged; with that option it serves what Zeus's server serves."""
    plans = tmp_path / "plans"
    plans.mkdir()
    orders = [["forward", "forward", "backward", "backward"],
              ["forward", "backward", "forward", "backward"]]
    (plans / "plan.py").write_text(zeus_rank_lists(orders, [1395, 1365], stage_of_rank=[0, 1]))
    monkeypatch.setenv("ZEUS_PFO_SCHEDULER", "PointSolution")
    monkeypatch.setenv("ZEUS_PFO_SCHEDULER_ARGS",
                       json.dumps({"solution_path": str(plans / "plan.py")}))
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    command = [perseus_bin, "serve", "--port", "0", "--store", str(elsewhere / "store.db")]
    refused = subprocess.run(command, cwd=elsewhere, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0, refused.stderr
    assert f"outside the server's --data-dir ({elsewhere})" in refused.stderr, refused.stderr
    assert f"start perseus serve with --data-dir {plans} " in refused.stderr, refused.stderr
    with running(serve(perseus_bin, elsewhere, argv=[*command, "--data-dir", str(plans)])) as url:
        ours = served_schedules(url, pp=2, dp=1)
    with running(zeus_server(elsewhere, "PointSolution",
                             {"solution_path": str(plans / "plan.py")})) as url:
        zeus = served_schedules(url, pp=2, dp=1)
    for rank in range(2):  # ours adds fields of its own (round, done)
        assert ours[rank][1]["frequencies"] == zeus[rank][1]["frequencies"], rank
