"""What a long job leaves behind (issue 50.6): a frontier job, which never ends, keeps only its
latest rounds in the store and in memory, with what the older ones measured, and continues after
a restart where it was, its straggler reports of dropped rounds still applied."""
import json
import sqlite3
import subprocess

from conftest import PERSEUS, rank_info, result_body
from test_schedulers_online import make_frontier

FREQS = list(range(1410, 854, -15))


def run_round(server, job_id, round_, joules=30.0):
    """Every rank of the 4-stage, 2-pipeline job fetches round `round_` and reports it."""
    answers = server.schedules(job_id, range(8), round_=round_)
    for rank, (status, body) in answers.items():
        assert status == 200 and body["round"] == round_, body
        names = [name for name, _ in body["frequencies"]]
        status, ack = server.post(f"/result/{job_id}",
                                  result_body(rank, names, joules=joules, round_=round_))
        assert status == 200, ack
    return {rank: body["frequencies"] for rank, (_, body) in answers.items()}


def stored_rows(store, job_id):
    db = sqlite3.connect(store)
    counts = {table: db.execute(f"SELECT COUNT(*) FROM {table} WHERE job_id = ?",
                                (job_id,)).fetchone()[0]
              for table in ("rounds", "results", "stragglers")}
    db.close()
    return counts


def endless_frontier_job(server, tmp_path):
    """A 4-stage, 2-pipeline frontier job with done_after 0: it never ends (it keeps serving
    rounds for stragglers), and its scheduler keeps no history, so the store drops old rounds."""
    frontier, _ = make_frontier(tmp_path)
    job_id = server.register_job(pp=4, dp=2, scheduler="frontier",
                                 scheduler_args={"frontier": str(frontier), "done_after": 0})
    for rank in range(8):
        assert server.post(f"/register_rank/{job_id}", rank_info(rank, 4, 2, 1, FREQS))[0] == 200
    return job_id


def test_a_frontier_job_keeps_its_latest_rounds_only(server_factory, tmp_path):
    server = server_factory()
    job_id = endless_frontier_job(server, tmp_path)
    plans = run_round(server, job_id, 0)
    status, answer = server.post(f"/straggler/{job_id}", {"dp_rank": 1, "factor": 1.1})
    assert (status, answer) == (200, None)
    for round_ in range(1, 30):
        plans = run_round(server, job_id, round_, joules=30.0 + round_)
    # Round 30 is served next; the store holds it and round 29, not 0..28.
    assert stored_rows(server.store, job_id) == {"rounds": 2, "results": 8, "stragglers": 1}
    status, job = server.get(f"/jobs/{job_id}")
    assert status == 200 and job["round"] == 30 and job["state"] == "running", job
    assert job["last_results"]["round"] == 29, job
    status, answer = server.get(f"/schedule/{job_id}?rank=0&round=3")
    assert status == 409 and "round 3 is over" in answer["detail"], answer
    # A retried report of a dropped round is acknowledged and changes nothing.
    assert server.post(f"/result/{job_id}", result_body(0, ["forward"], round_=3)) == (200, None)
    status, text = server.get("/metrics")
    assert f'perseus_job_rounds{{job="{job_id}"}} 31' in text, text

    server.kill()
    server.start()
    status, again = server.get(f"/jobs/{job_id}")
    assert status == 200 and again["round"] == 30 and again["state"] == "running", again
    assert again["last_results"] == job["last_results"]
    assert again["current_plan"] == job["current_plan"]  # the straggler's plan still applies
    assert "1" in again["current_plan"]["pipelines"]
    assert again["scheduler_status"]["stragglers"] == job["scheduler_status"]["stragglers"]
    assert run_round(server, job_id, 30) == plans
    assert stored_rows(server.store, job_id)["rounds"] == 2

    server.kill()
    dump = tmp_path / "dump"
    subprocess.run([PERSEUS, "export-job", "--store", server.store, "--job", job_id,
                    "--out", str(dump)], check=True, capture_output=True)
    assert sorted(p.name for p in dump.glob("*.sched.json")) == ["30.sched.json",
                                                                "31.sched.json"]
    assert [p["rank"] for p in json.loads((dump / "30.prof.json").read_text())] == list(range(8))


def test_a_store_from_before_measurements_had_a_column_keeps_its_saving(server_factory,
                                                                        tmp_path):
    """Stores kept a compacted job's measurements in its `compacted` row only, as of compacting;
    they now have a column of their own, written every measured round (export-job reads it)."""
    server = server_factory()
    job_id = endless_frontier_job(server, tmp_path)
    for round_ in range(5):
        run_round(server, job_id, round_, joules=30.0 - round_)
    status, job = server.get(f"/jobs/{job_id}")
    assert job["energy_saved_kwh"] > 0 and job["last_results"]["round"] == 4, job
    server.kill()
    db = sqlite3.connect(server.store)
    (measured, compacted), = db.execute("SELECT measured, compacted FROM jobs").fetchall()
    assert json.loads(measured)["counted_round"] == 4, measured
    old = dict(json.loads(compacted), measurements=json.loads(measured))
    db.execute("UPDATE jobs SET compacted = ?", (json.dumps(old),))
    db.execute("ALTER TABLE jobs DROP COLUMN measured")
    db.commit()
    db.close()
    server.start()
    status, again = server.get(f"/jobs/{job_id}")
    for field in ("energy_saved_kwh", "baseline", "last_results", "planned_energy_saving"):
        assert again[field] == job[field], (field, again, job)
