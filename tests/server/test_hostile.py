"""The control plane against hostile or buggy peers (issue 12): requests that used to end the
process, exhaust its memory or file descriptors, or hold connections forever. Every test asserts
the server stays up, answers with the right 4xx (or closes the connection) and a one-line reason,
and that another job completes meanwhile."""
import json
import os
import socket
import ssl
import threading
import time

import pytest

from conftest import rank_info, result_body, self_signed_certificate


def complete_job(server, **job):
    """Runs a 2-stage job (the server's default scheduler, or `job`'s) through one round and its
    results; asserts every step."""
    job_id = server.register_job(pp=2, **job)
    server.register_ranks(job_id, pp=2)
    answers = server.schedules(job_id, [0, 1])
    for rank, (status, schedule) in answers.items():
        assert status == 200, schedule
        names = [name for name, _ in schedule["frequencies"]]
        status, ack = server.post(f"/result/{job_id}",
                                  result_body(rank, names, round_=schedule["round"]))
        assert status == 200, ack
    status, info = server.get(f"/jobs/{job_id}")
    assert status == 200 and info["results_in_round"] == 2, info
    return job_id


def assert_healthy(server):
    assert server.alive(), server.log.read_text()
    status, health = server.get("/healthz", timeout=10)
    assert status == 200 and health["status"] == "ok"


def exchange(port, data, timeout=10):
    """Sends raw bytes on a fresh connection; returns everything read until the peer closes or
    `timeout` passes (b"" when the server closed without answering)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and b"Connection: keep-alive" in chunks[0]:
                break
        return b"".join(chunks)
    finally:
        sock.close()


def status_and_detail(answer):
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    detail = json.loads(body)["detail"]
    assert "\n" not in detail and len(detail) < 700, detail
    return status, detail


def post_bytes(path, body, extra_headers=""):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra_headers}\r\n"
            ).encode() + body


def half_sent_bodies(server, job_id, count, source):
    """`count` connections from address `source` that each announce a 60 KiB result and send
    half of it; returns (the sockets, how many were answered 503)."""
    held, refused = [], 0
    body = b'{"rank": 0, "pad": "' + b"x" * 60000 + b'"}'
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10,
                                        source_address=(source, 0))
        sock.sendall(post_bytes(f"/result/{job_id}", body)[:30000])
        held.append(sock)
    time.sleep(0.5)
    for sock in held:
        sock.settimeout(0.2)
        try:
            refused += sock.recv(4096).startswith(b"HTTP/1.1 503")
        except socket.timeout:
            pass
    return held, refused


@pytest.fixture
def server(server_factory):
    return server_factory("all-max", {"microbatches": 2})


def test_non_utf8_bytes_are_not_echoed(server):
    job_id = server.register_job(pp=2)
    cases = [
        post_bytes("/register_job", b'{"pp_degree": "\xff"}'),
        post_bytes("/register_job", b"\xff\xfe"),
        f"GET /schedule/{job_id}?rank=%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        .encode(),
        b"GET /schedule/\xff\xfe?rank=\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /\xc3\x28 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]
    for data in cases:
        status, detail = status_and_detail(exchange(server.port, data))
        assert 400 <= status < 500, (data, status, detail)
        detail.encode("utf-8")  # valid UTF-8: parsing the JSON answer proved it
        assert "\ufffd" not in detail or "\\x" in detail
        time.sleep(0.1)  # the old server died ~50 ms after such a request
        assert_healthy(server)
    complete_job(server)


def test_deep_json_nesting_is_refused(server):
    job_id = server.register_job(pp=2)
    deep = "[" * 30000 + "]" * 30000  # within the 64 KiB body limit of /register_job
    cases = [
        ("/register_job", '{"pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1, '
                          '"scheduler": "all-max", "scheduler_args": {"a": ' + deep + "}}"),
        (f"/result/{job_id}", '{"rank": 0, "time_breakdown": {"forward": ' + deep + "}}"),
    ]
    for path, body in cases:
        status, detail = status_and_detail(exchange(server.port, post_bytes(path, body.encode())))
        assert status == 400 and "nest" in detail, detail
    assert_healthy(server)
    complete_job(server)


def test_huge_numbers_are_a_bad_request(server):
    status, detail = status_and_detail(exchange(server.port, post_bytes(
        "/register_job", b'{"pp_degree": 1e400, "dp_degree": 1, "tp_degree": 1}')))
    assert status == 400 and "number" in detail, detail
    assert_healthy(server)


def test_oversized_and_unbounded_registrations_are_refused(server_factory):
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--max-ranks", "64", "--max-jobs", "4"])
    status, answer = server.post("/register_job", {"pp_degree": 30000000, "dp_degree": 1,
                                                   "tp_degree": 1, "world_size": 30000000})
    assert status == 422 and "--max-ranks" in answer["detail"], answer
    # Issue 50.4: a schedule too large to serve is refused at registration, at once.
    for args in ({"microbatches": 10**7}, {"microbatches": 5000, "virtual_stages": 8,
                                           "schedule": "interleaved-1f1b"}):
        status, answer = server.post("/register_job", {
            "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2,
            "scheduler": "all-max", "scheduler_args": args})
        assert status == 422 and "microbatches" in answer["detail"] \
            and "32768" in answer["detail"], answer
    job_id = server.register_job(pp=2)
    for freqs, reason in [(list(range(1000, 1000 + 2000)), "available_frequencies"),
                          ([10**9], "available_frequencies"), ([1410, 0], "available_frequencies"),
                          ([], "is empty")]:
        status, answer = server.post(f"/register_rank/{job_id}", rank_info(0, 2, freqs=freqs))
        assert status == 422 and reason in answer["detail"], answer
    status, answer = server.post(f"/register_rank/{job_id}",
                                 dict(rank_info(0, 2), simulated_gpu="yes"))
    assert status == 422 and "simulated_gpu" in answer["detail"], answer
    for _ in range(2):
        server.register_job(pp=1)
    complete_job(server)  # the fourth job
    status, answer = server.post("/register_job", {"pp_degree": 1, "dp_degree": 1,
                                                   "tp_degree": 1, "world_size": 1})
    assert status == 429 and "--max-jobs" in answer["detail"], answer
    # A store holding a job above this server's caps does not stop a smaller server.
    server.kill()
    server.args[server.args.index("--max-ranks") + 1] = "1"
    server.start()
    assert_healthy(server)
    status, jobs = server.get("/jobs")
    assert status == 200 and len(jobs) == 4
    for job in jobs:
        if job["world_size"] != 1:  # restored as failed, with the reason, and kept in the store
            assert job["world_size"] == 2 and job["ranks_registered"] == 0
            assert job["state"] == "failed" and "--max-ranks 1" in job["error"], job
    assert sum(job["state"] != "failed" for job in jobs) == 2


def test_bodies_are_bounded_per_request_and_in_total(server_factory):
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--max-body", "65536", "--max-inflight-bytes", "262144"])
    job_id = server.register_job(pp=2)
    big = b'{"rank": 0, "pad": "' + b"x" * 100000 + b'"}'
    status, detail = status_and_detail(exchange(server.port, post_bytes(f"/result/{job_id}", big)))
    assert status == 413 and "65536" in detail, detail
    # Eight peers each announce a 60 KiB body and send half of it: at most four fit the budget.
    held, refused = half_sent_bodies(server, job_id, 8, "127.0.0.1")
    assert refused >= 4, refused
    assert_healthy(server)
    complete_job(server)
    for sock in held:
        sock.close()


def test_abandoned_barrier_waits_free_their_descriptors(server_factory):
    server = server_factory("all-max", {"microbatches": 2}, fd_limit=128)
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=2)
    # Rank 0 asks and hangs up, 600 times: far more than the server's 128 descriptors.
    request = f"GET /schedule/{job_id}?rank=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    for _ in range(600):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(request)
        sock.close()
    assert_healthy(server)
    complete_job(server)
    # Rank 0 still counts as having asked: rank 1 alone releases round 0.
    status, schedule = server.get(f"/schedule/{job_id}?rank=1", timeout=10)
    assert status == 200 and schedule["round"] == 0, schedule


def test_one_peer_gets_only_its_share_of_the_body_budget(server_factory):
    """Issue 50.3: one peer address may hold --max-inflight-bytes-per-peer of bodies being read;
    the rest of the budget stays for the others."""
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--max-body", "65536", "--max-inflight-bytes", "262144",
                                   "--max-inflight-bytes-per-peer", "131072"])
    job_id = server.register_job(pp=2)
    # One peer (127.0.0.2) announces eight 60 KiB bodies and sends half of each: two fit its
    # share (the total would take four).
    held, refused = half_sent_bodies(server, job_id, 8, "127.0.0.2")
    assert refused == 6, refused
    assert "from 127.0.0.2 (--max-inflight-bytes-per-peer 131072)" in server.log.read_text()
    complete_job(server)  # from 127.0.0.1, within what is left
    for sock in held:
        sock.close()


def test_connections_are_capped_in_all_and_per_peer(server_factory):
    """Issue 50.2: past --max-connections, or --max-connections-per-peer from one address, a
    connection is closed at once (a 503 first); silent connections from one peer (fd limit 128)
    no longer stop the others' jobs. The caps and the refusals are in the log and /metrics."""
    server = server_factory("all-max", {"microbatches": 2}, fd_limit=128,
                            extra=["--max-connections-per-peer", "16"])
    # One peer opens 200 silent connections: 16 are kept, the rest refused.
    silent = []
    for _ in range(200):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10,
                                        source_address=("127.0.0.2", 0))
        silent.append(sock)
    time.sleep(0.5)
    refused = 0
    for sock in silent:
        sock.settimeout(0.05)
        try:
            answer = sock.recv(4096)
        except socket.timeout:
            continue
        assert answer.startswith(b"HTTP/1.1 503") and b"too many connections" in answer, answer
        refused += 1
    assert refused == 200 - 16, refused
    complete_job(server)  # another peer
    log = server.log.read_text()
    assert "connections: at most 96, 16 per peer address" in log, log
    assert "refused a connection from 127.0.0.2" in log
    assert log.count("refused a connection from") <= 3, log  # a line a second at most
    status, metrics = server.get("/metrics")
    assert status == 200
    assert "perseus_max_connections 96" in metrics and "perseus_max_connections_per_peer 16" \
        in metrics, metrics
    assert f"perseus_refused_connections_total {200 - 16}" in metrics, metrics
    for sock in silent:
        sock.close()
    # In all: past --max-connections from anywhere.
    capped = server_factory("all-max", {"microbatches": 2}, name="capped",
                            extra=["--max-connections", "4"])
    held = [socket.create_connection(("127.0.0.1", capped.port), timeout=10) for _ in range(4)]
    extra = socket.create_connection(("127.0.0.1", capped.port), timeout=10)
    assert extra.recv(4096).startswith(b"HTTP/1.1 503")
    for sock in held + [extra]:
        sock.close()
    time.sleep(0.3)
    assert_healthy(capped)


def test_a_connection_without_a_first_request_is_closed_early(server_factory):
    """Issue 50.2: a connection must send the header of a request with credentials within
    --first-request-timeout of its start; health checks do not count (they used to renew an idle
    connection for ever). After one, the idle timeout applies."""
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--first-request-timeout", "1", "--idle-timeout", "300"])
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    checker = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    worker = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    worker.sendall(b"GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n")
    assert worker.recv(65536).startswith(b"HTTP/1.1 200")
    # Closed (recv sees the end) before the socket's own 10 s timeout: the first-request deadline,
    # not the 300 s idle one, applied.
    assert silent.recv(4096) == b""
    closed = False
    for _ in range(10):  # a health check every 0.4 s does not keep it open
        try:
            checker.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            if not checker.recv(4096):
                closed = True
                break
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        time.sleep(0.4)
    assert closed
    time.sleep(1)
    worker.sendall(b"GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n")  # still open
    assert worker.recv(65536).startswith(b"HTTP/1.1 200")
    for sock in (silent, checker, worker):
        sock.close()


@pytest.mark.parametrize("transport", ["plain", "tls"])
@pytest.mark.parametrize("behind", ["one byte", "a pipelined request"])
def test_barrier_waits_with_bytes_behind_them_free_their_descriptors(server_factory, tmp_path,
                                                                     transport, behind):
    """Issue 50.1: a barrier wait followed by one more byte (or a second request) and a hang-up
    used to keep its descriptor for good (the bytes were kept, so the hang-up was never read);
    with 128 descriptors, 400 of them stopped the server. Token-less, plain and TLS."""
    tls, extra = None, []
    if transport == "tls":
        cert, key = self_signed_certificate(tmp_path)
        tls = ssl.create_default_context(cafile=cert)
        extra = ["--tls-cert", cert, "--tls-key", key]
    server = server_factory("all-max", {"microbatches": 2}, fd_limit=128, tls=tls, extra=extra)
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=2)
    request = f"GET /schedule/{job_id}?rank=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    tail = b"x" if behind == "one byte" else request
    for _ in range(400):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
        sock.sendall(request)
        time.sleep(0.002)  # the request is waiting in the barrier before the tail comes
        sock.sendall(tail)
        sock.close()
    assert_healthy(server)
    # Rank 0 still counts as having asked: rank 1 alone releases round 0.
    status, schedule = server.get(f"/schedule/{job_id}?rank=1", timeout=10)
    assert status == 200 and schedule["round"] == 0, schedule


def test_a_request_pipelined_behind_a_barrier_wait_closes_the_connection_after_its_answer(
        server_factory):
    """The waiting request is answered with "Connection: close"; the one behind it is not (a
    client retries it on a new connection), and the connection then closes."""
    server = server_factory("all-max", {"microbatches": 2})
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=2)
    request = f"GET /schedule/{job_id}?rank=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(request)
    time.sleep(0.2)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    status, _ = server.get(f"/schedule/{job_id}?rank=1", timeout=10)
    assert status == 200
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200") and b"Connection: close" in answer, answer[:300]
    assert answer.count(b"HTTP/1.1 ") == 1, answer


def test_descriptor_exhaustion_backs_off_and_recovers(server_factory):
    server = server_factory("all-max", {"microbatches": 2}, fd_limit=64)
    # Hold more connections than the server has descriptors for.
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(90)]
    time.sleep(0.5)
    for sock in held:
        sock.close()
    time.sleep(0.3)
    assert_healthy(server)
    complete_job(server)


def test_slow_and_idle_connections_are_closed(server_factory):
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--header-timeout", "1", "--idle-timeout", "2"])
    slow = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # slowloris: never finishes the header
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    begin = time.monotonic()
    assert slow.recv(4096) == b"", "a never-finished header must be closed"
    header_closed = time.monotonic() - begin
    assert idle.recv(4096) == b"", "an idle connection must be closed"
    idle_closed = time.monotonic() - begin
    assert 0.5 < header_closed < 5 and 1.5 < idle_closed < 6, (header_closed, idle_closed)
    # A barrier wait is not idle: it is answered when the round is released.
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=2)
    out = {}
    waiter = threading.Thread(target=lambda: out.update(r0=server.get(
        f"/schedule/{job_id}?rank=0", timeout=20)))
    waiter.start()
    time.sleep(3)
    status, _ = server.get(f"/schedule/{job_id}?rank=1")
    waiter.join(20)
    assert status == 200 and out["r0"][0] == 200, out
    assert_healthy(server)


def test_log_has_one_line_per_event(server_factory, tmp_path):
    log_file = tmp_path / "perseus.log"
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--log-file", str(log_file), "--log-level", "info"])
    job_id = complete_job(server)
    server.kill()
    server.start()  # the restart replays the stored job
    lines = log_file.read_text().splitlines()
    assert any(f"job {job_id} registered: 2 ranks" in line for line in lines), lines
    assert any(f"job {job_id} round 0 released to 2 waiting ranks" in line for line in lines)
    assert any(f"job {job_id} restored (done, round 0, 1 rounds replayed)" in line for line in lines)
    assert all(line[:4].isdigit() and line[23:24] == "Z" for line in lines), lines
    status, answer = server.post("/register_job", {"world_size": 1})
    assert status == 422


@pytest.mark.parametrize("scheduler, args, reason", [
    ("profiler", {"microbatches": 2, "output": "../../pwned.csv"}, "must not contain '..'"),
    ("profiler", {"microbatches": 2, "output": "/tmp/perseus-pwned.csv"},
     "is outside this job's own folder in the server's --output-dir"),
    ("point-solution", {"microbatches": 2, "solution_path": "/etc/passwd"},
     "is outside the server's --data-dir"),
    ("point-solution", {"microbatches": 2, "solution_path": "../../../etc"},
     "must not contain '..'"),
])
def test_scheduler_files_stay_in_the_server_folders(server, scheduler, args, reason, tmp_path):
    # Checked at registration: the job is refused with the reason, and nothing is stored.
    body = {"job_id": "", "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1,
            "scheduler": scheduler, "scheduler_args": args}
    status, answer = server.post("/register_job", body)
    assert status == 422 and reason in answer["detail"], answer
    assert answer["detail"].startswith(f"field 'scheduler_args': scheduler '{scheduler}'")
    assert "root:" not in answer["detail"]  # no file contents in any message
    assert server.get("/jobs") == (200, [])
    assert not (tmp_path / "pwned.csv").exists() and not (tmp_path.parent / "pwned.csv").exists()
    assert not os.path.exists("/tmp/perseus-pwned.csv")
    complete_job(server)


@pytest.mark.parametrize("scheduler, planted, reason", [
    ("point-solution", "a link out", "outside the server's --data-dir"),
    ("point-solution", "a FIFO", "is not a regular file"),
    ("point-solution", "a huge file", "an input file may have"),
    ("frontier", "a link out", "outside the server's --data-dir"),
    ("frontier", "a FIFO", "is not a regular file"),
])
def test_every_file_an_input_directory_holds_is_checked(server, tmp_path, tmp_path_factory,
                                                        scheduler, planted, reason):
    """Issue 50.13/14: an input directory's members are checked as they would be opened: a
    symlink among them that leads out of --data-dir (an outside plan was served), a FIFO (read,
    it blocked the server for as long as nothing wrote it) or a file above 64 MiB (seconds on
    the loop) refuses the job at registration, at once."""
    folder = tmp_path / "inputs"  # inside --data-dir (the servers' parent folder)
    folder.mkdir()
    (folder / "a.json").write_text("[[1410]]")
    member = folder / "b.json"
    if planted == "a link out":
        outside = tmp_path_factory.mktemp("outside") / "plan.json"
        outside.write_text("[[1410]]")
        member.symlink_to(outside)
    elif planted == "a FIFO":
        os.mkfifo(member)
    else:
        with open(member, "wb") as f:
            f.truncate((64 << 20) + 1)
    arg = "solution_path" if scheduler == "point-solution" else "frontier"
    body = {"job_id": "", "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1,
            "scheduler": scheduler, "scheduler_args": {"microbatches": 2, arg: str(folder)}}
    if scheduler == "frontier":
        del body["scheduler_args"]["microbatches"]
    status, answer = server.post("/register_job", body)
    assert status == 422 and reason in answer["detail"], answer
    assert "b.json" in answer["detail"], answer
    complete_job(server)


def test_a_job_writes_only_in_its_own_output_folder(server):
    """Issue 50.15: a job's outputs go to its own folder in --output-dir, never another job's
    (a job with only the cluster token wrote another job's profile there), and an output that
    names a folder is refused at registration, not after the sweep."""
    def register(output):
        return server.post("/register_job", {
            "job_id": "", "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1,
            "scheduler": "profiler", "scheduler_args": {"microbatches": 2, "output": output}})

    status, first = register("profile.csv")
    assert status == 200, first
    others = server.workdir / "out" / first
    status, answer = register(str(others / "profile.csv"))
    assert status == 422 and "outside this job's own folder" in answer["detail"], answer
    for folder in (".", "profiles/"):
        status, answer = register(folder)
        assert status == 422 and "names a folder" in answer["detail"], answer
    _, jobs = server.get("/jobs")
    assert [job["job_id"] for job in jobs] == [first]


@pytest.mark.parametrize("transport", ["plain", "tls"])
def test_a_half_closed_barrier_wait_gets_its_answer(server_factory, tmp_path, transport):
    """Issue 50.18: a client that shuts down its sending side after its schedule request (a
    half-close: a TCP end of stream, over TLS without close_notify) still reads the answer when
    the barrier releases, and the connection then closes; hang-ups after more bytes still close
    at once (test above)."""
    tls, extra = None, []
    if transport == "tls":
        cert, key = self_signed_certificate(tmp_path)
        tls = ssl.create_default_context(cafile=cert)
        extra = ["--tls-cert", cert, "--tls-key", key]
    server = server_factory("all-max", {"microbatches": 2}, tls=tls, extra=extra)
    job_id = server.register_job(pp=2)
    server.register_ranks(job_id, pp=2)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
    sock.sendall(f"GET /schedule/{job_id}?rank=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    # The TCP shutdown itself (SSLSocket.shutdown would also drop the TLS session).
    socket.socket.shutdown(sock, socket.SHUT_WR)
    time.sleep(0.3)  # the server has seen the end of the stream
    status, schedule = server.get(f"/schedule/{job_id}?rank=1", timeout=10)
    assert status == 200 and schedule["round"] == 0, schedule
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    sock.close()
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and b"Connection: close" in head, head
    assert json.loads(body)["rank"] == 0 and json.loads(body)["round"] == 0, body


def test_a_registration_reads_its_files_off_the_event_loop(server, tmp_path):
    """Issue 50.14: the files a registration's scheduler arguments name (up to 64 MiB each) are
    read off the event loop: while a 60 MB plan is read and refused, other requests are
    answered (before, every request waited for it)."""
    plan = tmp_path / "huge_plan.py"  # inside --data-dir (the servers' parent folder)
    plan.write_text("[[" + ", ".join(["1410"] * 10_000_000) + "]]\n")
    answer = {}

    def register():
        answer["reply"] = server.post("/register_job", {
            "job_id": "", "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1,
            "scheduler": "point-solution",
            "scheduler_args": {"microbatches": 2, "solution_path": str(plan)}})

    thread = threading.Thread(target=register)
    thread.start()
    time.sleep(0.2)  # the registration is being read
    status, metrics = server.get("/metrics")
    assert status == 200
    # Answered while the registration is still read: it has no answer yet.
    assert 'endpoint="register_job",status="422"' not in metrics, metrics
    thread.join(60)
    status, detail = answer["reply"]
    assert status == 422 and "huge_plan.py" in detail["detail"], detail


def test_a_job_makes_its_scheduler_off_the_event_loop(server, tmp_path):
    """Issue 50.14: when the last rank registers, the job's scheduler is made (its plans read
    again: here 24 plans of 1.5 MB) off the event loop: the registration is answered at once and
    the job shows "registering" until its scheduler is made, then runs; meanwhile other requests
    are answered. (Before, the last registration's answer, and every other request, waited.)"""
    plans = tmp_path / "plans"  # inside --data-dir (the servers' parent folder)
    plans.mkdir()
    row = "[" + ", ".join(["1410"] * 65536) + "]"
    for i in range(24):
        (plans / f"plan{i:02d}.py").write_text("[\n" + ",\n".join([row] * 4) + "\n]\n")
    job_id = server.register_job(pp=4, scheduler="point-solution",
                                 scheduler_args={"microbatches": 32768, "solution_path": str(plans)})
    for rank in range(4):
        assert server.post(f"/register_rank/{job_id}", rank_info(rank, 4))[0] == 200
    status, job = server.get(f"/jobs/{job_id}")
    assert status == 200 and job["state"] == "registering", job
    assert server.get("/healthz")[0] == 200
    for _ in range(1200):
        status, job = server.get(f"/jobs/{job_id}")
        if job["state"] != "registering":
            break
        time.sleep(0.05)
    assert job["state"] == "running" and job["round"] == 0, job


def thread_cpu_ticks(pid):
    """{thread name: CPU ticks (user + system)} of a process's threads, summed by name."""
    ticks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        key = "event loop" if int(tid) == pid else name
        ticks[key] = ticks.get(key, 0) + int(fields[11]) + int(fields[12])
    return ticks


def test_large_answers_are_built_off_the_event_loop(server):
    """Issue 50.8: /metrics, /jobs and the status page are built on the renderer thread, not on
    the event loop (where every other request would wait for them): over 30 such answers for
    1,500 jobs, the renderer thread (named perseus-render) spends more CPU time than the event
    loop, which only copies what they show and writes them. (Before, there was no renderer
    thread.)"""
    job = json.dumps({"job_id": "", "pp_degree": 8, "dp_degree": 1, "tp_degree": 1,
                      "world_size": 8, "job_metadata": None}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        reader = sock.makefile("rb")
        for _ in range(1500):  # one keep-alive connection: registering is the cheap part
            sock.sendall(b"POST /register_job HTTP/1.1\r\nHost: x\r\nContent-Length: "
                         + str(len(job)).encode() + b"\r\n\r\n" + job)
            assert reader.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
    before = thread_cpu_ticks(server.proc.pid)
    assert "perseus-render" in before, before
    for _ in range(10):
        for path in ("/metrics", "/jobs", "/"):
            assert server.get(path)[0] == 200
    after = thread_cpu_ticks(server.proc.pid)
    spent = {name: after[name] - before.get(name, 0) for name in after}
    assert spent["perseus-render"] > spent["event loop"], spent


def test_a_job_plans_its_first_round_off_the_event_loop(server):
    """Issue 50.4/50.14: the first round of a job at the schedule cap (8 stages x 32,768
    microbatches, 2^18 pairs) is planned and written as text on the renderer thread, with its
    scheduler; the event loop only stores it. (Before, the loop planned and wrote it: 0.3-0.6 s
    in which no other request was answered.)"""
    job_id = server.register_job(pp=8, scheduler="all-max", scheduler_args={"microbatches": 32768})
    before = thread_cpu_ticks(server.proc.pid)
    server.register_ranks(job_id, pp=8)
    after = thread_cpu_ticks(server.proc.pid)
    assert server.get(f"/jobs/{job_id}")[1]["state"] == "running"
    spent = {name: after[name] - before.get(name, 0) for name in after}
    assert spent["perseus-render"] > spent["event loop"], spent
