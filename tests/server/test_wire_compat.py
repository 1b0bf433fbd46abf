"""The server speaks the Zeus pipeline-frequency-optimizer protocol: the exact bodies the Zeus
client sends, and answers of the shapes it parses (job id string, null, FrequencySchedule)."""
import re

from conftest import rank_info, result_body


def check_frequency_schedule(body, rank):
    # Zeus: FrequencySchedule(rank: int >= 0, frequencies: list[tuple[str, int]])
    assert body["rank"] == rank
    assert isinstance(body["frequencies"], list) and body["frequencies"]
    for pair in body["frequencies"]:
        assert isinstance(pair, list) and len(pair) == 2
        assert isinstance(pair[0], str) and isinstance(pair[1], int)


def test_zeus_client_round_trip(server_factory):
    server = server_factory("all-max", {"microbatches": 3})
    job_id = server.register_job(pp=2, metadata="gpt3")
    assert isinstance(job_id, str)
    # Zeus job id: date, degrees, scheduler name, metadata.
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\+dp1\+pp2\+tp1\+all-max\+gpt3", job_id)
    for rank in range(2):
        status, body = server.post(f"/register_rank/{job_id}", rank_info(rank, 2))
        assert (status, body) == (200, None)
    answers = server.schedules(job_id, [0, 1])
    for rank, (status, body) in answers.items():
        assert status == 200
        check_frequency_schedule(body, rank)
        names = [name for name, _ in body["frequencies"]]
        assert names.count("forward") == 3 and names.count("backward") == 3
        assert all(mhz == 1410 for _, mhz in body["frequencies"])
    instructions = [name for name, _ in answers[0][1]["frequencies"]]
    for rank in range(2):
        status, body = server.post(f"/result/{job_id}", result_body(rank, instructions))
        assert (status, body) == (200, None)


def test_schedule_differs_per_stage_and_is_shared_within_a_stage(server_factory):
    server = server_factory("all-max", {"microbatches": 4})
    job_id = server.register_job(pp=2, dp=2, tp=2)
    server.register_ranks(job_id, pp=2, dp=2, tp=2)
    answers = server.schedules(job_id, range(8))
    by_stage = {}
    for rank, (status, body) in answers.items():
        assert status == 200
        check_frequency_schedule(body, rank)
        by_stage.setdefault(rank // 4, set()).add(str(body["frequencies"]))
    assert all(len(plans) == 1 for plans in by_stage.values())
    assert by_stage[0] != by_stage[1]  # 1F1B: stage 0 warms up with more forwards


def test_health_jobs_and_status_page(server_factory):
    server = server_factory("all-max", {"microbatches": 2})
    status, health = server.get("/healthz")
    assert status == 200 and health["status"] == "ok" and health["jobs"] == 0
    job_id = server.register_job(pp=2, metadata="visible")
    status, jobs = server.get("/jobs")
    assert status == 200 and [j["job_id"] for j in jobs] == [job_id]
    assert jobs[0]["state"] == "registering" and jobs[0]["ranks_registered"] == 0
    server.register_ranks(job_id, pp=2)
    server.schedules(job_id, [0, 1])
    status, job = server.get(f"/jobs/{job_id}")
    assert status == 200 and job["state"] == "done" and job["round"] == 0
    assert len(job["current_plan"]["stages"]) == 2
    status, page = server.get("/")
    assert status == 200 and job_id in page and "<table>" in page


def test_zeus_results_after_done_and_repeated_results_are_acknowledged(server_factory, tmp_path):
    # Zeus clients send no `round`, retry a result whose answer they lost, and keep reporting
    # every window after the final schedule: each of those is a 200 that changes nothing.
    plan = tmp_path / "plan.py"
    plan.write_text("[[1395, 1395, 1395, 1395], [1380, 1380, 1380, 1380]]\n")
    server = server_factory("point-solution", {"solution_path": str(plan), "microbatches": 2,
                                               "warmup_rounds": 1})
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=2)
    for expected_round in (0, 1):
        answers = server.schedules(job_id, [0, 1])
        for rank, (status, body) in answers.items():
            assert status == 200 and body["round"] == expected_round, body
            names = [name for name, _ in body["frequencies"]]
            for _ in range(2):  # the report and its retry, both without `round`
                assert server.post(f"/result/{job_id}", result_body(rank, names)) == (200, None)
    status, job = server.get(f"/jobs/{job_id}")
    assert job["state"] == "done" and job["round"] == 1 and job["results_in_round"] == 2, job
    for _ in range(3):  # windows after `done`: schedule (the final one) and a result
        for rank, (status, body) in server.schedules(job_id, [0, 1]).items():
            assert status == 200 and body["done"] and body["round"] == 1
            names = [name for name, _ in body["frequencies"]]
            assert server.post(f"/result/{job_id}", result_body(rank, names)) == (200, None)
    status, after = server.get(f"/jobs/{job_id}")
    assert after["round"] == 1 and after["results_in_round"] == 2
