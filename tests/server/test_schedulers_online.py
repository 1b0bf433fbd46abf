"""Schedulers that react to what the job reports, driven over HTTP: the frontier scheduler
moves the other pipelines to a cheaper plan after a straggler report, and bad reports get a 400
naming the field."""
import csv
import json
import re
import subprocess

import pytest

from conftest import PERSEUS, measured_windows, rank_info, result_body


def make_frontier(tmp_path, stages=4, microbatches=4):
    profile = tmp_path / "profile.csv"
    subprocess.run([PERSEUS, "profile", "synth", "--gpu", "a100", "--stages", str(stages),
                    "--out", str(profile)], check=True, capture_output=True)
    frontier = tmp_path / "frontier"
    subprocess.run([PERSEUS, "plan", "--profile", str(profile), "--stages", str(stages),
                    "--microbatches", str(microbatches), "--blocking-power", "83.64",
                    "--out", str(frontier), "--quiet"], check=True, capture_output=True)
    rows = list(csv.DictReader(open(frontier / "frontier.csv")))
    return frontier, rows


def test_frontier_scheduler_reacts_to_a_straggler(server_factory, tmp_path):
    frontier, rows = make_frontier(tmp_path)
    freqs = list(range(1410, 854, -15))
    server = server_factory()
    job_id = server.register_job(pp=4, dp=2, scheduler="frontier",
                                 scheduler_args={"frontier": str(frontier)})
    for rank in range(8):
        assert server.post(f"/register_rank/{job_id}", rank_info(rank, 4, 2, 1, freqs))[0] == 200
    round0 = server.schedules(job_id, range(8))
    plans0 = {rank: body["frequencies"] for rank, (status, body) in round0.items()}
    assert plans0[0] == plans0[1]  # both pipelines run the fastest plan (stage 0)
    # Pipeline 1 will be 10% slower than the fastest plan.
    status, answer = server.post(f"/straggler/{job_id}", {"dp_rank": 1, "factor": 1.1})
    assert (status, answer) == (200, None)
    for rank in range(8):
        names = [n for n, _ in plans0[rank]]
        assert server.post(f"/result/{job_id}", result_body(rank, names, round_=0))[0] == 200
    round1 = server.schedules(job_id, range(8), round_=1)
    plans1 = {rank: body["frequencies"] for rank, (status, body) in round1.items()}
    # Megatron order: rank = stage * dp + dp_rank. The straggler keeps the fastest plan; the
    # other pipeline slows down to a cheaper plan.
    for stage in range(4):
        assert plans1[stage * 2 + 1] == plans0[stage * 2 + 1]
    slower = sum(mhz for s in range(4) for _, mhz in plans1[s * 2])
    faster = sum(mhz for s in range(4) for _, mhz in plans1[s * 2 + 1])
    assert slower < faster
    status, job = server.get(f"/jobs/{job_id}")
    assert job["scheduler_status"], job
    assert "1" in job["current_plan"]["pipelines"]


def test_bad_straggler_reports(server_factory, tmp_path):
    frontier, _ = make_frontier(tmp_path)
    server = server_factory()
    job_id = server.register_job(pp=4, dp=2, scheduler="frontier",
                                 scheduler_args={"frontier": str(frontier)})
    status, answer = server.post(f"/straggler/{job_id}", {"dp_rank": 0, "factor": 1.2})
    assert status == 409 and "has not started" in answer["detail"]
    server.register_ranks(job_id, pp=4, dp=2, freqs=list(range(1410, 854, -15)))
    for body, reason in [({"dp_rank": 5, "factor": 1.2}, "dp_rank"),
                         ({"dp_rank": 0, "factor": 0.5}, "factor"),
                         ({"dp_rank": 0}, "")]:
        status, answer = server.post(f"/straggler/{job_id}", body)
        assert status == 400 and reason in answer["detail"], (body, answer)
    # A scheduler without straggler support says so.
    other = server.register_job(pp=1, scheduler="profiler", scheduler_args={"microbatches": 2})
    server.register_ranks(other, pp=1)
    status, answer = server.post(f"/straggler/{other}", {"dp_rank": 0, "factor": 1.2})
    assert status == 400 and "straggler" in answer["detail"]
    # A job that is done (all-max: after its one round) takes none: its ranks ask no more.
    done = server.register_job(pp=1, scheduler="all-max", scheduler_args={"microbatches": 2})
    server.register_ranks(done, pp=1)
    status, answer = server.post(f"/straggler/{done}", {"dp_rank": 0, "factor": 1.2})
    assert status == 409 and "is done" in answer["detail"], answer


def test_a_round_a_rank_did_not_measure_is_measured_again_and_never_shown(server_factory):
    """A rank whose energy counter did not change in its window reports energy_measured false:
    the profiler measures that clock again, the job shows the last round every rank measured,
    and both hold after a restart (the store keeps the report as it came)."""
    server = server_factory()
    job_id = server.register_job(pp=1, scheduler="profiler", scheduler_args={
        "microbatches": 1, "skip_iterations": 0, "max_windows": 1, "min_window": 0})
    server.register_ranks(job_id, pp=1)
    clocks = []
    for round_, measured in enumerate([True, False]):
        status, schedule = server.get(f"/schedule/{job_id}?rank=0&round={round_}")
        assert status == 200, schedule
        clocks.append(schedule["frequencies"][0][1])
        body = result_body(0, [n for n, _ in schedule["frequencies"]], round_=round_,
                           joules=30.0 if measured else 0.0)
        if not measured:
            body["energy_measured"] = False
        assert server.post(f"/result/{job_id}", body) == (200, None)
    assert clocks == [1410, 1395]
    for restarted in (False, True):
        if restarted:
            server.kill()
            server.start()
        status, schedule = server.get(f"/schedule/{job_id}?rank=0&round=2")
        assert status == 200 and schedule["frequencies"][0][1] == 1395, schedule  # again
        job = server.get(f"/jobs/{job_id}")[1]
        assert job["last_results"]["round"] == 0, job
        assert job["last_results"]["stages"][0]["mean_energy_j"] > 0, job
        assert job["scheduler_status"]["measured"] == 1, job["scheduler_status"]
        assert job["unmeasured_ranks"] == [0], job  # in round 1, the latest complete one
        metrics = server.get("/metrics")[1]
        assert re.search(rf'^perseus_job_unmeasured_ranks\{{job="{re.escape(job_id)}"\}} 1$',
                         metrics, re.M), metrics


def test_a_frontier_job_run_until_done_ends_by_itself(server_factory, tmp_path):
    """Issue 51.1: `simulate-training --until-done` against the frontier scheduler ran 2,000
    rounds and gave up (the scheduler never said done). Now the job is done once its plans have
    been measured for `done_after` windows (default 3): round 3 says so, the ranks stop there, and
    the job shows done with its measured windows; a straggler report then gets a 409."""
    frontier, _ = make_frontier(tmp_path)
    server = server_factory("frontier", {"frontier": str(frontier)})
    run = subprocess.run([PERSEUS, "simulate-training", "--server", server.url, "--stages", "4",
                          "--microbatches", "4", "--blocking-power", "83.64", "--report-every",
                          "1", "--until-done", "--max-iterations", "200", "--quiet", "--out",
                          str(tmp_path / "run.json")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "run.json").read_text())
    assert result["finished"], result
    # 51.3: the run says its energies are the simulated GPUs' own, not a counter's reading.
    assert result["gpus"] == "simulated", result
    assert result["energy_source"] == "the simulated GPUs' true energy", result
    # ... and keeps what the clients' counters measured apart: every iteration's, a counter
    # model's reading (noisy, not the true energy), and what the ranks reported to the server.
    assert result["measured_energy_source"].startswith("the clients' energy counters"), result
    iterations = result["iterations"]
    assert all(it["measured_energy_j"] is not None for it in iterations), iterations
    assert any(it["measured_energy_j"] != it["energy_j"] for it in iterations), iterations
    for it in iterations:
        assert it["measured_energy_j"] == pytest.approx(it["energy_j"], rel=0.02), it
    final = result["final_schedule"]
    assert final["measured_iterations"] == final["iterations"] > 0, final
    status, job = server.get(f"/jobs/{result['job_id']}")
    assert job["state"] == "done" and job["round"] == 3, job
    assert job["scheduler_status"]["measured_windows"] == 3, job["scheduler_status"]
    # 51.3: the ranks said their GPUs are simulated, and the server says so.
    assert job["simulated_ranks"] == 4, job
    # 51.2: no all-max round was measured, so the job shows what its plan was planned to save,
    # labelled so (it showed "-").
    assert job["energy_saving"] is None and job["last_results"]["round"] == 3, job
    planned = job["scheduler_status"]["saving"]
    assert planned > 0 and job["planned_energy_saving"] == planned, job
    assert job["planned_slowdown"] == job["scheduler_status"]["slowdown"], job
    # Against that planned baseline, each window saved its energy x saving / (1 - saving).
    assert job["baseline"]["source"] == "planned", job
    last, printed = measured_windows(server, result["job_id"], tmp_path / "dump")
    # Each round's window, as the server stored it, is the run's counter-measured iterations.
    for round_, (energy, n) in enumerate(last):
        measured = [it["measured_energy_j"] for it in iterations if it["round"] == round_][:n]
        assert energy == pytest.approx(sum(measured) / n, rel=1e-9), (round_, energy, measured)
    saved_j = sum(energy * planned / (1 - planned) * n for energy, n in last)
    assert job["energy_saved_kwh"] == pytest.approx(saved_j / 3.6e6, rel=1e-9), (job, last)
    assert job["energy_saved_planned_kwh"] == job["energy_saved_kwh"], job
    assert job["baseline"]["energy_j"] == pytest.approx(last[-1][0] / (1 - planned)), job
    status, page = server.get("/")
    saving = f"{100 * planned:.2f} % (planned); {saved_j / 3.6e6:.4f} kWh saved so far (against " \
        "the planned all-max)"
    assert saving in page, page
    # export-job, from the store alone, says what the page says.
    assert f"state: done; saving: {saving}\n" in printed, printed
    assert "4 / 4 (simulated GPUs)" in page, page
    status, metrics = server.get("/metrics")
    assert f'perseus_job_planned_energy_saving_ratio{{job="{result["job_id"]}"}}' in metrics
    status, answer = server.post(f"/straggler/{result['job_id']}", {"dp_rank": 0, "factor": 1.2})
    assert status == 409 and "is done" in answer["detail"], answer
