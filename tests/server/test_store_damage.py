"""Store failures are contained (issue 12): one server per store, a damaged store is refused or
its damaged jobs fail alone, and a store that refuses a write loses nothing acknowledged."""
import json
import socket
import os
import sqlite3
import subprocess
import threading
import time

import pytest

from conftest import PERSEUS, raw_request, result_body
from test_hostile import assert_healthy, complete_job


def start_fails(server):
    """Runs the server's command again; returns its one error line (it must exit non-zero)."""
    out = subprocess.run(server.args, capture_output=True, text=True, timeout=30,
                         cwd=server.workdir)
    assert out.returncode != 0, out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("perseus: error:")]
    assert len(errors) == 1, out.stderr
    return errors[0]


def test_second_server_on_the_same_store_is_refused(server_factory):
    server = server_factory("all-max", {"microbatches": 2})
    reason = start_fails(server)
    assert "is in use by another server (pid" in reason and str(server.proc.pid) in reason
    assert_healthy(server)
    complete_job(server)
    server.kill()  # SIGKILL releases the lock: the next server starts
    server.start()
    assert_healthy(server)


@pytest.mark.parametrize("second_name", ["symlink", "hard link", "lock note deleted"])
def test_a_second_name_for_the_store_is_the_same_store(server_factory, second_name):
    """Issue 50.10: the lock is on the database file itself, so a second server reaching it by
    another name (a symlink, a hard link), or after its lock note was deleted, is refused (two
    servers on one database, two -wal files through a hard link, corrupt it)."""
    server = server_factory("all-max", {"microbatches": 2})
    other = server.workdir / "other.sqlite"
    if second_name == "symlink":
        other.symlink_to(server.store)
    elif second_name == "hard link":
        os.link(server.store, other)
    else:
        os.remove(server.store + ".lock")
        other = server.store
    args = list(server.args)
    args[args.index("--store") + 1] = str(other)
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=server.workdir)
    assert out.returncode != 0, out.stdout
    assert "is in use by another server" in out.stderr, out.stderr
    assert_healthy(server)
    complete_job(server)


@pytest.mark.parametrize("removed", ["store.sqlite", "store.sqlite-wal"])
def test_a_store_removed_while_serving_stops_acknowledging(server_factory, removed):
    """Issue 50.11: the database file or its write-ahead log removed under a running server used
    to go unnoticed (20 more jobs acknowledged, none back after a restart); now the next write
    finds out, fails (503, logged), and so does every write after it."""
    server = server_factory("all-max", {"microbatches": 2})
    complete_job(server)
    assert (server.workdir / removed).exists()
    os.remove(server.workdir / removed)
    time.sleep(0.3)
    for _ in range(3):
        status, answer = server.post("/register_job", {"pp_degree": 1, "dp_degree": 1,
                                                       "tp_degree": 1, "world_size": 1})
        assert status == 503 and "while serving; nothing more is acknowledged" in \
            answer["detail"], answer
    assert "was removed" in server.log.read_text()
    status, health = server.get("/healthz")
    assert status == 200  # still up: its jobs' schedules are still served from memory


def test_an_empty_store_file_is_not_started_empty(server_factory):
    """Issue 50.11: a 0-byte store file (no log beside it) is refused at start, not started as a
    new empty store; a path that does not exist still makes a new store."""
    server = server_factory("all-max", {"microbatches": 2})
    server.kill()
    for leftover in ("store.sqlite-wal", "store.sqlite-shm"):
        if (server.workdir / leftover).exists():
            os.remove(server.workdir / leftover)
    open(server.store, "w").close()
    reason = start_fails(server)
    assert "is an empty file" in reason and "remove it to start a new store" in reason, reason
    os.remove(server.store)
    server.start()
    assert_healthy(server)


def test_empty_store_beside_a_write_ahead_log_is_an_error(server_factory):
    server = server_factory("all-max", {"microbatches": 2})
    complete_job(server)
    server.kill()
    wal = server.workdir / "store.sqlite-wal"
    if wal.stat().st_size == 0:
        pytest.skip("SQLite checkpointed the log")
    open(server.store, "w").close()  # the database file lost, its log kept
    reason = start_fails(server)
    assert "is an empty file but" in reason and "-wal holds" in reason


def corrupt(store, sql, *params):
    db = sqlite3.connect(store)
    db.execute(sql, params)
    db.commit()
    db.close()


@pytest.mark.parametrize("damage, reason", [
    ("UPDATE ranks SET body = '{not json' WHERE rowid = (SELECT MIN(rowid) FROM ranks "
     "WHERE job_id = ?)", "ranks row"),
    ("UPDATE results SET round = 1000000000000 WHERE job_id = ?", "not a stored round"),
    ("UPDATE ranks SET body = json_set(body, '$.rank', 99) WHERE rowid = (SELECT MIN(rowid) "
     "FROM ranks WHERE job_id = ?)", "out of range"),
])
def test_a_damaged_job_fails_alone(server_factory, damage, reason):
    server = server_factory("all-max", {"microbatches": 2})
    damaged = complete_job(server)
    healthy = complete_job(server)
    server.kill()
    corrupt(server.store, damage, damaged)
    server.start()
    assert_healthy(server)
    status, info = server.get(f"/jobs/{damaged}")
    assert status == 200 and info["state"] == "failed" and reason in info["error"], info
    status, answer = server.get(f"/schedule/{damaged}?rank=0")
    assert status == 500 and reason in answer["detail"]
    status, info = server.get(f"/jobs/{healthy}")
    assert info["state"] == "done", info
    complete_job(server)


def test_corrupt_database_file_is_refused(server_factory):
    server = server_factory("all-max", {"microbatches": 2})
    for _ in range(40):
        server.register_job(pp=1, metadata="x" * 200)
    server.kill()
    db = sqlite3.connect(server.store)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page into the database file
    db.close()
    data = bytearray(open(server.store, "rb").read())
    assert len(data) >= 4 * 4096, len(data)
    for page in range(1, len(data) // 4096):  # every page but the first (the header)
        data[page * 4096 + 8:page * 4096 + 40] = b"\xff" * 32
    open(server.store, "wb").write(bytes(data))
    reason = start_fails(server)
    assert "store" in reason and ("quick_check" in reason or "not a usable" in reason
                                  or "malformed" in reason), reason


def test_a_refused_write_is_a_503_and_nothing_is_lost(server_factory):
    server = server_factory("all-max", {"microbatches": 2})
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=2)
    answers = server.schedules(job_id, [0, 1])
    # A stray writer holds the database's write lock longer than the server waits for it.
    holder = sqlite3.connect(server.store, timeout=0, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    names = [name for name, _ in answers[0][1]["frequencies"]]
    status, answer = server.post(f"/result/{job_id}", result_body(0, names, round_=0))
    assert status == 503 and "nothing was recorded, retry" in answer["detail"], answer
    assert_healthy(server)
    holder.execute("ROLLBACK")
    holder.close()
    for rank in (0, 1):  # the retry is accepted and the round completes
        status, answer = server.post(f"/result/{job_id}", result_body(rank, names, round_=0))
        assert status == 200, answer
    status, info = server.get(f"/jobs/{job_id}")
    assert info["results_in_round"] == 2, info
    server.kill()
    server.start()
    status, info = server.get(f"/jobs/{job_id}")
    assert info["results_in_round"] == 2, info


def test_a_store_that_keeps_refusing_a_new_round_fails_the_job_with_the_reason(server_factory,
                                                                                 tmp_path):
    plan = tmp_path / "plan.py"
    plan.write_text("[[1395, 1395, 1395, 1395], [1380, 1380, 1380, 1380]]\n")
    server = server_factory(extra=["--store-retry-for", "1"])
    job_id = server.register_job(pp=2, scheduler="point-solution", scheduler_args={
        "solution_path": str(plan), "microbatches": 2, "warmup_rounds": 1})
    server.register_ranks(job_id, pp=2)
    other = complete_job(server, scheduler="all-max", scheduler_args={"microbatches": 2})
    server.kill()
    # From now on SQLite refuses to store round 1 of any job (a real write failure).
    corrupt(server.store, "CREATE TRIGGER refuse_round_1 BEFORE INSERT ON rounds "
                          "WHEN NEW.round >= 1 BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
    server.start()
    answers = server.schedules(job_id, [0, 1])
    for rank, (status, schedule) in answers.items():
        names = [name for name, _ in schedule["frequencies"]]
        status, _ = server.post(f"/result/{job_id}", result_body(rank, names, round_=0))
        assert status == 200  # the results themselves are stored
    answers = server.schedules(job_id, [0, 1], round_=1)
    for status, answer in answers.values():  # after a second of retries
        assert status == 500 and "the store failed while storing round 1" in answer["detail"]
        assert "disk says no" in answer["detail"] and "--store-retry-for 1 s" in answer["detail"]
    assert_healthy(server)
    status, info = server.get(f"/jobs/{other}")
    assert info["state"] == "done"
    assert "job " + job_id + ": store " in server.log.read_text()  # the retries were logged



def test_a_short_store_outage_does_not_end_the_job(server_factory, tmp_path):
    """Issue 50.12: a store that refuses writes for a while (a disk full for seconds) holds the
    job's next round back, retried every second across the ranks' windows, instead of failing
    the job for good; once it takes the round, the ranks get it."""
    plan = tmp_path / "plan.py"
    plan.write_text("[[1395, 1395, 1395, 1395], [1380, 1380, 1380, 1380]]\n")
    server = server_factory()
    job_id = server.register_job(pp=2, scheduler="point-solution", scheduler_args={
        "solution_path": str(plan), "microbatches": 2, "warmup_rounds": 1})
    server.register_ranks(job_id, pp=2)
    answers = server.schedules(job_id, [0, 1])
    corrupt(server.store, "CREATE TRIGGER refuse_round_1 BEFORE INSERT ON rounds "
                          "WHEN NEW.round >= 1 BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    for rank, (status, schedule) in answers.items():
        names = [name for name, _ in schedule["frequencies"]]
        status, _ = server.post(f"/result/{job_id}", result_body(rank, names, round_=0))
        assert status == 200
    # The ranks' windows pass: their requests for round 1 wait (their clients give up after
    # their stall bound and train on); the job still runs.
    for _ in range(2):
        for rank in (0, 1):
            sock = raw_request(server.port, f"GET /schedule/{job_id}?rank={rank}&round=1 "
                                            "HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.settimeout(1.2)
            with pytest.raises(socket.timeout):
                sock.recv(100)
            sock.close()
    status, info = server.get(f"/jobs/{job_id}")
    assert info["state"] == "running" and info["round"] == 0, info
    assert "retrying every 1 s" in server.log.read_text()
    corrupt(server.store, "DROP TRIGGER refuse_round_1")
    answers = server.schedules(job_id, [0, 1], round_=1)
    assert all(status == 200 and body["round"] == 1 for status, body in answers.values()), answers
    assert "the store works again (storing round 1)" in server.log.read_text()
