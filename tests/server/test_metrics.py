"""GET /metrics during a real simulated job (issue 14): Prometheus's own text parser
(python3-prometheus-client) reads it, and the values agree with the job's results; the status
page and /jobs show each job's saving and mark silent jobs stale."""
import json
import time

import pytest

from conftest import measured_windows, served_plans_run

parser = pytest.importorskip("prometheus_client.parser",
                             reason="python3-prometheus-client is not installed")


def scrape(server):
    status, text = server.get("/metrics")
    assert status == 200, text
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    return text, families


def value(families, name, **labels):
    samples = [s for f in families.values() for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(samples) == 1, (name, labels, samples)
    return samples[0].value


def test_metrics_agree_with_a_simulated_jobs_results(server_factory, tmp_path):
    # Round 0 runs all-max (warm-up), round 1 the first plan, round 2 the second, final one
    # (measured too: clients report the final plans' first window, then stop).
    server, job = served_plans_run(server_factory, tmp_path, 6,
                                   [["--max-slowdown", "5%"], ["--fastest"]])
    job_id = job["job_id"]
    assert job["state"] == "done" and job["all_max_round"] == 0 and job["last_results"]["round"] == 2

    text, families = scrape(server)
    stages = job["last_results"]["stages"]
    energy = sum(s["mean_energy_j"] for s in stages)
    assert value(families, "perseus_job_iteration_energy_joules", job=job_id) == pytest.approx(energy)
    assert value(families, "perseus_job_iteration_seconds", job=job_id) == pytest.approx(
        max(s["mean_time_s"] for s in stages))
    for s, stage in enumerate(stages):
        assert value(families, "perseus_job_stage_iteration_energy_joules", job=job_id,
                     stage=str(s)) == pytest.approx(stage["mean_energy_j"])
    saving = value(families, "perseus_job_energy_saving_ratio", job=job_id)
    assert saving == pytest.approx(job["energy_saving"]) and 0.05 < saving < 0.5, saving
    assert value(families, "perseus_job_rounds", job=job_id) == 3
    assert value(families, "perseus_job_stale", job=job_id) == 0
    assert value(families, "perseus_jobs") == 1
    assert value(families, "perseus_open_connections") >= 1  # this scrape's own
    # Every rank fetched three rounds and reported each; each answer was counted.
    assert value(families, "perseus_http_responses_total", endpoint="register_rank",
                 status="200") == 4
    assert value(families, "perseus_http_responses_total", endpoint="result", status="200") >= 12
    assert value(families, "perseus_barrier_release_seconds_count") == 3
    assert value(families, "perseus_store_write_seconds_count") > 10
    # 51.2: the slowdown, the baseline (the all-max round 0) and the energy saved so far: each
    # measured window's saving per iteration against round 0, times its iterations.
    slowdown = value(families, "perseus_job_slowdown_ratio", job=job_id)
    assert slowdown == pytest.approx(job["slowdown"]) and 0 < slowdown <= 0.05, job
    assert job["baseline"]["source"] == "measured" and job["baseline"]["round"] == 0, job
    windows, printed = measured_windows(server, job_id, tmp_path / "dump")
    assert job["baseline"]["energy_j"] == pytest.approx(windows[0][0])
    saved_j = sum((windows[0][0] - energy) * n for energy, n in windows)
    assert saved_j > 0
    assert job["energy_saved_kwh"] == pytest.approx(saved_j / 3.6e6, rel=1e-9), (job, windows)
    assert job["energy_saved_planned_kwh"] == 0, job
    assert value(families, "perseus_job_energy_saved_joules", job=job_id) == pytest.approx(saved_j)
    # The saving also shows on the status page, with what it costs and what it saved so far.
    status, page = server.get("/")
    assert f"{100 * saving:.2f} %, time +{100 * slowdown:.2f} %" in page, page
    assert f"{saved_j / 3.6e6:.4f} kWh saved so far<" in page, page
    # export-job says the same, and writes it with the dump (summary.json).
    assert f"state: done; saving: {100 * saving:.2f} %, time +{100 * slowdown:.2f} %; " \
        f"{saved_j / 3.6e6:.4f} kWh saved so far\n" in printed, printed
    exported = json.loads((tmp_path / "dump" / "summary.json").read_text())
    for field in ("state", "energy_saving", "slowdown", "baseline", "energy_saved_kwh", "round",
                  "last_results", "simulated_ranks"):
        assert exported[field] == job[field], (field, exported, job)
    # A restart replays the stored rounds: what they saved is not counted twice.
    server.kill()
    server.start()
    status, again = server.get(f"/jobs/{job_id}")
    assert again["energy_saved_kwh"] == pytest.approx(job["energy_saved_kwh"], rel=1e-12), again


def test_a_done_job_keeps_counting_what_it_saves(server_factory, tmp_path):
    """51.2: the job is done once its final plans are served and their first window measured,
    but it trains on with them: its ranks keep reporting each window (`final_window`), and the
    energy saved counts every window of the run, also across a server restart."""
    server, job = served_plans_run(server_factory, tmp_path, 6, [["--fastest"]], iterations=60)
    job_id = job["job_id"]
    run = json.loads((tmp_path / "run.json").read_text())
    report_every = run["report_every"]
    iterations = run["iterations"]
    final = [it for it in iterations if it["round"] == 1]
    assert job["state"] == "done" and len(final) >= 3 * report_every, (job, len(final))
    # Every iteration's window was measured and reported; all-max is round 0's window.
    assert all(it["measured_energy_j"] is not None for it in iterations), iterations
    baseline = sum(it["measured_energy_j"] for it in iterations if it["round"] == 0) / \
        sum(1 for it in iterations if it["round"] == 0)
    assert job["baseline"]["energy_j"] == pytest.approx(baseline, rel=1e-9), job
    saved_j = sum(baseline - it["measured_energy_j"] for it in iterations)
    assert job["energy_saved_kwh"] == pytest.approx(saved_j / 3.6e6, rel=1e-9), (job, saved_j)
    # What the final round's first window alone saved, which was all that was counted before.
    first_window = sum(baseline - it["measured_energy_j"] for it in final[:report_every])
    assert saved_j > 2 * first_window > 0
    server.kill()
    server.start()
    status, again = server.get(f"/jobs/{job_id}")
    assert again["energy_saved_kwh"] == job["energy_saved_kwh"], again
    # A final window is one of the final round's, of a done job.
    body = {"rank": 0, "iter_time": [1.0], "iter_energy": [10.0], "time_breakdown": {},
            "energy_breakdown": {}, "round": 0, "final_window": 1}
    status, answer = server.post(f"/result/{job_id}", body)
    assert status == 409 and "not the job's final round 1" in answer["detail"], answer
    status, answer = server.post(f"/result/{job_id}", dict(body, final_window=0))
    assert status == 422 and "final_window" in answer["detail"], answer


def test_a_silent_job_is_stale(server_factory):
    server = server_factory("all-max", {"microbatches": 2}, extra=["--stale-after", "0.3"])
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=1 * 2)
    time.sleep(0.6)
    status, jobs = server.get("/jobs")
    assert jobs[0]["stale"] is True and jobs[0]["idle_s"] > 0.3, jobs
    _, families = scrape(server)
    assert value(families, "perseus_job_stale", job=job_id) == 1
    status, page = server.get("/")
    assert "stale: no request for" in page
    server.schedules(job_id, [0, 1])  # the ranks speak again
    status, jobs = server.get("/jobs")
    assert jobs[0]["stale"] is False


def test_metrics_need_the_cluster_token(server_factory, tmp_path):
    token = tmp_path / "token"
    token.write_text("cluster-token-0123456789abcdef\n")
    server = server_factory("all-max", {"microbatches": 2}, extra=["--token-file", str(token)],
                            name="secured")
    assert server.get("/metrics")[0] == 401


def test_long_metadata_stays_out_of_job_ids_and_metrics(server_factory):
    """Issue 50.8: a job's id takes at most 64 characters of its metadata (and of its scheduler's
    name), so 60 KB of metadata no longer make a 60 KB id repeated in every job metric; the whole
    metadata is still the job's."""
    server = server_factory("all-max", {"microbatches": 2})
    metadata = "team=" + "x" * 60000
    ids = [server.register_job(pp=2, metadata=metadata) for _ in range(20)]
    assert len(set(ids)) == 20 and all(len(i) <= 200 for i in ids), [len(i) for i in ids]
    status, job = server.get(f"/jobs/{ids[0]}")
    assert status == 200 and job["job_metadata"] == metadata
    status, text = server.get("/metrics")
    assert status == 200 and len(text) < 200_000, len(text)
