"""The end of a job (issue 50.7): finished and abandoned jobs expire after a configurable idle
time, an operator deletes a job with DELETE /jobs/{id} or `perseus serve delete-job`, and both
free the job's place under --max-jobs, in memory and in the store, across restarts."""
import re
import socket
import sqlite3
import subprocess
import time

from conftest import PERSEUS
from test_auth import TOKEN, call, new_job

ALL_MAX = ("all-max", {"microbatches": 2})


def done_job(server, **credentials):
    """A one-rank all-max job that ran its only round: done."""
    status, job_id, headers = call(server, "POST", "/register_job", {
        "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1}, **credentials)
    assert status == 200, job_id
    secret = headers.get("X-Perseus-Job-Secret")
    status, answer, _ = call(server, "POST", f"/register_rank/{job_id}",
                             {"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0,
                              "available_frequencies": [1410]}, secret=secret, **credentials)
    assert status == 200, answer
    status, schedule, _ = call(server, "GET", f"/schedule/{job_id}?rank=0", secret=secret,
                               **credentials)
    assert status == 200 and schedule["done"], schedule
    status, job, _ = call(server, "GET", f"/jobs/{job_id}", **credentials)
    assert status == 200 and job["state"] == "done", job
    return job_id


def waiting_rank(server, job_id):
    """Rank 0 of a registered 2-rank job asks for round 0, which waits for rank 1: the socket."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    sock.sendall(f"GET /schedule/{job_id}?rank=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def answer_of(sock):
    """(status, body text) of the one answer a socket gets."""
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < content_length(data):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), body.decode()


def content_length(data):
    match = re.search(rb"content-length: *(\d+)", data.split(b"\r\n\r\n", 1)[0], re.I)
    return int(match.group(1)) if match else 0


def running_job(server, **credentials):
    """A 2-stage job with both ranks registered and rank 0 waiting in round 0's barrier."""
    if credentials.get("token"):
        job_id, secret = new_job(server)
    else:
        job_id, secret = server.register_job(pp=2), None
    for rank in (0, 1):
        status, answer, _ = call(server, "POST", f"/register_rank/{job_id}",
                                 {"rank": rank, "dp_rank": 0, "pp_rank": rank, "tp_rank": 0,
                                  "available_frequencies": [1410]}, secret=secret, **credentials)
        assert status == 200, answer
    # Its scheduler is made off the server's event loop once the last rank registered.
    eventually(lambda: call(server, "GET", f"/jobs/{job_id}", **credentials)[1]["state"]
               == "running")
    return job_id, secret


def metric(server, name, token=None):
    status, text = server.get("/metrics" + (f"?token={token}" if token else ""))
    assert status == 200, text
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def eventually(check, timeout=15):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the test's patience"
        time.sleep(0.1)


def test_finished_jobs_expire_and_free_their_place(server_factory):
    server = server_factory(*ALL_MAX, extra=["--max-jobs", "2", "--expire-finished-after", "1",
                                             "--expire-abandoned-after", "0"])
    done = done_job(server, token=None)
    abandoned = server.register_job(pp=2)  # never registers a rank; 0: abandoned jobs stay
    status, answer = server.post("/register_job", {"pp_degree": 1, "dp_degree": 1,
                                                   "tp_degree": 1, "world_size": 1})
    assert status == 429 and "DELETE /jobs/{id}" in answer["detail"], answer
    eventually(lambda: server.get(f"/jobs/{done}")[0] == 404)
    assert server.get(f"/jobs/{abandoned}")[0] == 200
    assert metric(server, "perseus_jobs_expired_total") == 1
    assert re.search(rf"job {re.escape(done)} expired: done and no request for .* "
                     r"\(--expire-finished-after 1 s\); deleted from the store",
                     server.log.read_text())
    server.register_job(pp=1)  # its place is free
    server.kill()
    server.start()
    _, jobs = server.get("/jobs")
    assert done not in [job["job_id"] for job in jobs] and len(jobs) == 2


def test_abandoned_job_expires_by_its_stored_idle_time(server_factory):
    server = server_factory(*ALL_MAX, extra=["--expire-abandoned-after", "3600"])
    job_id, _ = running_job(server, token=None)
    sock = waiting_rank(server, job_id)
    time.sleep(0.2)
    server.kill()
    sock.close()
    time.sleep(1.5)
    server.start()
    # A restart does not make the job look active: its idle time counts from its last activity.
    status, job = server.get(f"/jobs/{job_id}")
    assert status == 200 and job["state"] == "running" and job["idle_s"] >= 1.4, job
    server.kill()
    server.args[server.args.index("--expire-abandoned-after") + 1] = "4"
    server.start()
    sock = waiting_rank(server, job_id)  # asks again: active now, deleted 4 s after
    status, body = answer_of(sock)
    assert status == 404 and f"job '{job_id}' was deleted: expired: running" in body, body
    assert server.get(f"/jobs/{job_id}")[0] == 404


def test_delete_job(server_factory):
    server = server_factory(*ALL_MAX)
    done = done_job(server, token=None)
    status, answer = server.request("DELETE", f"/jobs/{done}")
    assert status == 200 and answer == {"deleted": done, "state": "done"}, answer
    assert server.get(f"/jobs/{done}")[0] == 404
    assert server.request("DELETE", f"/jobs/{done}")[0] == 404
    running, _ = running_job(server, token=None)
    sock = waiting_rank(server, running)
    status, answer = server.request("DELETE", f"/jobs/{running}")
    assert status == 409 and "force" in answer["detail"] and "running" in answer["detail"]
    assert server.get(f"/jobs/{running}")[1]["state"] == "running"
    status, answer = server.request("PUT", f"/jobs/{running}")
    assert status == 405 and "GET or DELETE only" in answer["detail"], answer
    status, answer = server.request("DELETE", f"/jobs/{running}?force=true")
    assert status == 200 and answer["state"] == "running", answer
    status, body = answer_of(sock)  # the waiting rank hears of it at once
    assert status == 404 and "deleted by an operator" in body, body
    assert metric(server, "perseus_jobs_deleted_total") == 2
    # A new job never gets a deleted job's id (made of the same second and fields), which the
    # deleted job's ranks would go on using.
    again = done_job(server, token=None)
    assert server.request("DELETE", f"/jobs/{again}")[0] == 200
    last = done_job(server, token=None)
    assert last != again
    server.kill()
    server.start()
    assert [job["job_id"] for job in server.get("/jobs")[1]] == [last]


def test_delete_needs_the_job_secret_only_while_the_job_runs(server_factory, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = server_factory(*ALL_MAX, extra=["--token-file", str(token_file)])
    running, secret = running_job(server, token=TOKEN)
    assert call(server, "DELETE", f"/jobs/{running}?force=true", token=None)[0] == 401
    status, answer, _ = call(server, "DELETE", f"/jobs/{running}?force=true")
    assert status == 403 and "secret" in answer["detail"], answer
    status, answer, _ = call(server, "DELETE", f"/jobs/{running}?force=true", secret=secret)
    assert status == 200, answer
    done = done_job(server, token=TOKEN)
    status, answer, _ = call(server, "DELETE", f"/jobs/{done}")  # the token alone: an operator
    assert status == 200 and answer["state"] == "done", answer


def test_delete_job_command_on_a_stopped_server_store(server_factory):
    server = server_factory(*ALL_MAX)
    done = done_job(server, token=None)
    running, _ = running_job(server, token=None)

    def delete(*args):
        return subprocess.run([PERSEUS, "serve", "delete-job", "--store", server.store, *args],
                              capture_output=True, text=True)

    busy = delete("--job", done)
    assert busy.returncode != 0 and "in use by another server" in busy.stderr \
        and "DELETE /jobs/{id}" in busy.stderr, busy.stderr
    server.kill()
    refused = delete("--job", running)
    assert refused.returncode != 0 and "--force" in refused.stderr, refused.stderr
    unknown = delete("--job", "no-such-job")
    assert unknown.returncode != 0 and "unknown job 'no-such-job'" in unknown.stderr
    for job_id, extra in ((done, ()), (running, ("--force",))):
        deleted = delete("--job", job_id, *extra)
        assert deleted.returncode == 0 and f"deleted job {job_id}" in deleted.stdout, deleted
    server.start()
    assert server.get("/jobs")[1] == []


def test_a_store_from_before_activity_times_is_upgraded(server_factory):
    server = server_factory(*ALL_MAX)
    job_id = server.register_job(pp=2)
    server.kill()
    db = sqlite3.connect(server.store)  # the jobs table as stores had it before active_at
    db.executescript("""
        CREATE TABLE old_jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL
          UNIQUE, info TEXT NOT NULL, error TEXT NOT NULL DEFAULT '');
        INSERT INTO old_jobs SELECT seq, job_id, info, error FROM jobs;
        DROP TABLE jobs; ALTER TABLE old_jobs RENAME TO jobs;""")
    db.close()
    server.start()
    status, job = server.get(f"/jobs/{job_id}")
    assert status == 200 and job["state"] == "registering" and job["idle_s"] < 60, job
    server.kill()
    db = sqlite3.connect(server.store)
    columns = [row[1] for row in db.execute("PRAGMA table_info(jobs)")]
    (active_at,), = db.execute("SELECT active_at FROM jobs").fetchall()
    db.close()
    assert "active_at" in columns and active_at == 0  # unknown until the job makes progress


def test_the_memory_of_all_jobs_is_budgeted_across_restarts(server_factory):
    """Issue 50.5: the jobs held may take --max-memory together, each what its ranks (8 KiB
    each) and the instructions of its plans (128 bytes each, counted on the first round its
    checked scheduler makes) cost: 400 registrations of 65536 ranks took 1.76 GB, and a job of
    2^22 (stage, microbatch) pairs 2 GB. A registration past it is a 429 that says what the job
    needs, deleting a job frees its share, and a restart under a lower budget restores the jobs
    that fit, oldest first, and the others as failed with the reason."""
    server = server_factory(*ALL_MAX, extra=["--max-ranks", "8", "--max-memory", "110KiB"])
    first = server.register_job(pp=8)  # 8 ranks, 32 instructions: 68 KiB
    status, answer = server.post("/register_job", {"pp_degree": 8, "dp_degree": 1,
                                                   "tp_degree": 1, "world_size": 8})
    assert status == 429 and "--max-memory 110.0 KiB" in answer["detail"], answer
    assert "jobs held take 68.0 KiB" in answer["detail"], answer
    # One rank, but plans of 2048 instructions: 264 KiB, which its rank alone would not show.
    status, answer = server.post("/register_job", {
        "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1,
        "scheduler": "all-max", "scheduler_args": {"microbatches": 1024}})
    assert status == 429 and "2048 instructions a round" in answer["detail"], answer
    second = server.register_job(pp=4)  # 34 KiB
    assert server.request("DELETE", f"/jobs/{first}?force=true")[0] == 200
    third = server.register_job(pp=8)
    _, metrics = server.get("/metrics")
    assert f"perseus_jobs_memory_bytes {102 * 1024}" in metrics, metrics
    assert f"perseus_max_memory_bytes {110 * 1024}" in metrics, metrics
    server.kill()
    server.args[server.args.index("--max-memory") + 1] = "64KiB"
    server.start()
    _, jobs = server.get("/jobs")
    states = {job["job_id"]: job for job in jobs}
    assert states[second]["state"] == "registering", states
    assert states[third]["state"] == "failed", states
    assert "above this server's --max-memory 64.0 KiB" in states[third]["error"], states
    # The failed job holds nothing: a job of 2 ranks (17 KiB) still fits.
    server.register_job(pp=2)
