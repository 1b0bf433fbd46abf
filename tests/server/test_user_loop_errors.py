"""The loop a user runs fails loudly and says why (issue 51): a job whose instruction order does
not match the served plan is refused at registration, naming both; the cause comes first in
what simulate-training prints, the ranks it stopped collapsed into one line, with what to do."""
import socket
import subprocess

from conftest import PERSEUS, served_plans_run
from test_schedulers_online import make_frontier


def simulate(url, tmp_path, microbatches=4, extra=()):
    return subprocess.run([PERSEUS, "simulate-training", "--server", url, "--stages", "4",
                           "--microbatches", str(microbatches), "--blocking-power", "83.64",
                           "--iterations", "10", "--quiet", "--out", str(tmp_path / "run.json"),
                           *extra], capture_output=True, text=True, timeout=120)


def warnings(stderr):
    return [line for line in stderr.splitlines() if line.startswith("perseus: warning: ")]


def test_a_job_that_does_not_match_its_frontier_is_refused_at_registration(server_factory,
                                                                            tmp_path):
    """51.4: an 8-microbatch job against a 12-microbatch frontier was accepted and ran every
    iteration at the default clock, and simulate-training exited 0. Now the job registers its
    own order, the server refuses it (422 naming both microbatch counts), and the run exits 1."""
    frontier, _ = make_frontier(tmp_path, microbatches=12)
    server = server_factory("frontier", {"frontier": str(frontier)})
    run = simulate(server.url, tmp_path, microbatches=8)
    assert run.returncode == 1, run.stderr
    first = warnings(run.stderr)[0]
    assert first.startswith("perseus: warning: rank 0: ") and "HTTP 422" in first, run.stderr
    assert "12 microbatches against the job's 4 GPUs, 4 stages, 8 microbatches" in first, first
    assert "no iteration ran a schedule of the server" in run.stderr, run.stderr
    _, jobs = server.get("/jobs")
    assert jobs == []


def test_the_cause_comes_first_and_the_ranks_it_stopped_are_one_line(tmp_path):
    """51.5: a missing server printed one "rank N did not register the job" line per rank, the
    cause among them at a random place. Now rank 0's error (which says what to do) comes first
    and the other ranks are one line."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = simulate(f"http://127.0.0.1:{port}", tmp_path)
    assert run.returncode == 1, run.stderr
    lines = warnings(run.stderr)
    assert len(lines) == 2, run.stderr
    assert lines[0].startswith("perseus: warning: rank 0: ") and "cannot connect" in lines[0]
    assert "is `perseus serve` running at that address?" in lines[0], lines[0]
    assert lines[1].startswith("perseus: warning: ranks 1-3: ") and \
        "rank 0 did not register the job" in lines[1], lines[1]


def test_a_missing_token_says_how_to_give_it(server_factory, tmp_path):
    """51.5 and 51.7: without the token, rank 0 says how to give it; simulate-training takes it
    from --token-file (it had no option for it)."""
    (tmp_path / "token").write_text("user-loop-token-0123456789\n")
    server = server_factory("all-max", {"microbatches": 4},
                            extra=["--token-file", str(tmp_path / "token")])
    run = simulate(server.url, tmp_path)
    assert run.returncode == 1, run.stderr
    first = warnings(run.stderr)[0]
    assert "HTTP 401" in first and "PERSEUS_TOKEN" in first, first
    run = simulate(server.url, tmp_path, extra=["--token-file", str(tmp_path / "token")])
    assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr


def test_a_single_plan_after_a_warm_up_shows_what_it_saved(server_factory, tmp_path):
    """51.2: a point-solution job of one plan after an all-max warm-up round showed a 0.00 %
    saving: the clients stopped reporting at the final schedule, so the plan was never
    measured. Now they report the final plans' first window, and the job shows its saving."""
    _, job = served_plans_run(server_factory, tmp_path, 4, [["--max-slowdown", "5%"]])
    assert job["state"] == "done" and job["all_max_round"] == 0, job
    assert job["last_results"]["round"] == 1, job
    assert 0.05 < job["energy_saving"] < 0.5, job
