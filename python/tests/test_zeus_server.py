"""Zeus configurations carry over (issue 51.8-12): Zeus's own server (zeus 0.16 on FastAPI) and
ours, given the same configuration, serve the same plans; our client against Zeus's server."""

import contextlib
import json
import subprocess
import time

import pytest

import perseus
from conftest import train
from server_support import MICROBATCHES, ShareJobId, on_rank_threads, one_f_one_b, serve
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


def our_ranks_against(url, profile, pause_rank1_s=0.0, stall_bound=1.0, iterations=6,
                      pause_rank0_s=0.0, **options):
    """Two ranks of our Python client (threads, simulated GPUs) train a 2-stage 1F1B job (3
    microbatches) against `url`; rank 1 starts `pause_rank1_s` late, rank 0 `pause_rank0_s`.
    Returns {rank: warnings}."""
    share = ShareJobId()
    logs, errors = {0: [], 1: []}, []

    def rank_main(rank):
        try:
            time.sleep(pause_rank1_s if rank == 1 else pause_rank0_s)
            opt = perseus.PipelineFrequencyOptimizer(
                rank, 0, rank, 0, 0, 1, 2, 1, 2, url, None, gpu="sim", profile=profile,
                counter="ideal", report_every=1, share_job_id=share, stall_bound=stall_bound,
                barrier_timeout=stall_bound, log=logs[rank].append, **options)
            train(opt, iterations, one_f_one_b(2, rank, MICROBATCHES))
            opt.close()
        except BaseException as e:  # reported in the main thread
            errors.append((rank, repr(e)))

    on_rank_threads(rank_main, 2, errors)
    return logs


def zeus_plan_for_our_ranks(tmp_path):
    plan = tmp_path / "plan.py"
    plan.write_text(zeus_rank_lists([one_f_one_b(2, 0, MICROBATCHES),
                                     one_f_one_b(2, 1, MICROBATCHES)], [1395, 1365], [0, 1]))
    return str(plan)


def test_our_client_never_asks_zeus_server_twice_for_one_round(tmp_path, profile2):
    """51.12: rank 1 reaches the barrier of Zeus's server 2.5 s after rank 0, past rank 0's
    stall bound (1 s). Zeus's server counts every schedule request at its barrier, so rank 0
    must not ask again (a second request would release the barrier wrongly, and every later
    request of the job would hang): it says so once and trains on at the default clocks. (Before,
    it retried, logging the usual "retrying every N iterations".)"""
    with running(zeus_server(tmp_path, "PointSolution",
                             {"solution_path": zeus_plan_for_our_ranks(tmp_path)})) as url:
        logs = our_ranks_against(url, profile2, pause_rank1_s=2.5, stall_bound=1.0)
    assert len(logs[0]) == 1, logs
    assert "counts every schedule request at its barrier" in logs[0][0], logs
    assert "without the server from now on" in logs[0][0], logs
    assert all("retrying every" not in line for line in logs[0] + logs[1]), logs


def test_our_client_stops_asking_zeus_server_whose_scheduler_failed(tmp_path, profile2):
    """51.12: Zeus's scheduler fails at the job's start (a plan for 3 ranks, the job has 2):
    Zeus's server answers each rank's schedule request once with a 500, then never answers the
    job again. Our client stops asking at the 500, once per rank. (Before, it retried every
    window, each retry stalling training for the stall bound.)"""
    plan = tmp_path / "plan.py"
    plan.write_text(zeus_rank_lists([["forward", "backward"]], [1395], [0, 0, 0]))
    with running(zeus_server(tmp_path, "PointSolution", {"solution_path": str(plan)})) as url:
        logs = our_ranks_against(url, profile2, pause_rank1_s=0.0, stall_bound=5.0)
    for rank in (0, 1):
        assert len(logs[rank]) == 1, logs
        assert "HTTP 500" in logs[rank][0] and "scheduler failed on a server that is not " \
            "Perseus's" in logs[rank][0], logs


def test_a_rank_held_in_the_job_id_broadcast_keeps_its_stall_bound_for_the_server(
        perseus_bin, tmp_path, profile2):
    """51.12: rank 0 starts 2.5 s late, so rank 1 waits that long in the job-id broadcast (the
    framework's collective), past its stall bound (1 s); its requests to the server after the
    broadcast still get their whole stall bound: no rank warns. (Before, rank 1's registration
    found its time spent and the rank trained at the default clocks.)"""
    with running(serve(perseus_bin, tmp_path, scheduler="all-max",
                       scheduler_args={"microbatches": MICROBATCHES})) as url:
        logs = our_ranks_against(url, profile2, pause_rank0_s=2.5, stall_bound=1.0)
    assert logs == {0: [], 1: []}, logs


def test_a_job_scheduler_that_zeus_server_ignores_is_warned_about(tmp_path, profile2):
    """51.12: Zeus's server runs its default scheduler for every job; rank 0, which asked for
    its own (all-max), says once that Zeus's server ignores it."""
    with running(zeus_server(tmp_path, "PointSolution",
                             {"solution_path": zeus_plan_for_our_ranks(tmp_path)})) as url:
        logs = our_ranks_against(url, profile2, stall_bound=10.0, scheduler="all-max",
                                 scheduler_args={"microbatches": MICROBATCHES})
    assert len(logs[0]) == 1 and "ignores this job's own scheduler 'all-max'" in logs[0][0], logs
    assert logs[1] == [], logs
