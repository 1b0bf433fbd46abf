"""Authentication (issue 12): with a cluster token every endpoint but /healthz needs it (401),
each job's endpoints need that job's secret (403), a refused request changes nothing, and a
server reachable from other hosts needs a token or --insecure."""
import json
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import PERSEUS, rank_info, result_body

TOKEN = "cluster-token-0123456789abcdef"


def call(server, method, path, body=None, token=TOKEN, secret=None, scheme="Bearer "):
    """(status, JSON answer, headers) with the given credentials."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"{scheme}{token}"
    if secret:
        headers["X-Perseus-Job-Secret"] = secret
    req = urllib.request.Request(server.url + path, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read() or b"null"), resp.headers
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers


@pytest.fixture
def secured(server_factory, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    return server_factory("all-max", {"microbatches": 2}, extra=["--token-file", str(token_file)])


def new_job(server):
    status, job_id, headers = call(server, "POST", "/register_job", {
        "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2})
    assert status == 200, job_id
    secret = headers["X-Perseus-Job-Secret"]
    assert len(secret) == 32
    return job_id, secret


def test_every_endpoint_needs_the_cluster_token(secured):
    assert call(secured, "GET", "/healthz", token=None)[0] == 200
    job_id, secret = new_job(secured)
    endpoints = [("POST", "/register_job", {"pp_degree": 1, "dp_degree": 1, "tp_degree": 1,
                                            "world_size": 1}),
                 ("GET", "/jobs", None), ("GET", f"/jobs/{job_id}", None), ("GET", "/", None),
                 ("POST", f"/register_rank/{job_id}", rank_info(0, 2)),
                 ("GET", f"/schedule/{job_id}?rank=0", None),
                 ("POST", f"/result/{job_id}", result_body(0, ["forward"])),
                 ("POST", f"/straggler/{job_id}", {"rank": 0, "slowdown": 2.0})]
    for token in (None, "wrong-token"):
        for method, path, body in endpoints:
            status, answer, _ = call(secured, method, path, body, token=token, secret=secret)
            assert status == 401 and "cluster token" in answer["detail"], (path, answer)
    status, jobs, _ = call(secured, "GET", "/jobs")
    assert status == 200 and len(jobs) == 1 and jobs[0]["ranks_registered"] == 0
    log = secured.log.read_text()
    assert "auth failure: GET /jobs: no cluster token" in log
    assert "auth failure: GET /jobs: wrong cluster token" in log
    assert TOKEN not in log and secret not in log


def test_the_authorization_scheme_is_case_insensitive(secured):
    """Issue 50.19: RFC 9110's auth-scheme is case-insensitive, with one or more spaces before the
    credentials; anything else is no bearer token."""
    for scheme in ("bearer ", "BEARER ", "bEaReR ", "Bearer   "):
        status, jobs, _ = call(secured, "GET", "/jobs", scheme=scheme)
        assert status == 200 and jobs == [], (scheme, jobs)
    for scheme in ("Basic ", "Bearer", "Bearer\t", "Bearers ", ""):
        status, answer, _ = call(secured, "GET", "/jobs", scheme=scheme)
        assert status == 401 and "cluster token" in answer["detail"], (scheme, answer)


def test_a_job_needs_its_own_secret(secured):
    job_a, secret_a = new_job(secured)
    job_b, secret_b = new_job(secured)
    for rank in (0, 1):
        status, answer, _ = call(secured, "POST", f"/register_rank/{job_a}", rank_info(rank, 2),
                                 secret=secret_a)
        assert status == 200, answer
    # Job b's owner (or anyone with the cluster token alone) cannot touch job a.
    wrong_digit = "1" if secret_a.endswith("0") else "0"  # a secret one digit off, never a's own
    for secret in (None, secret_b, secret_a[:-1] + wrong_digit):
        for method, path, body in [
                ("POST", f"/register_rank/{job_a}", rank_info(0, 2, freqs=[210])),
                ("GET", f"/schedule/{job_a}?rank=0", None),
                ("POST", f"/result/{job_a}", result_body(0, ["forward"], round_=0)),
                ("POST", f"/straggler/{job_a}", {"rank": 0, "slowdown": 5.0})]:
            status, answer, _ = call(secured, method, path, body, secret=secret)
            assert status == 403 and f"secret of job '{job_a}'" in answer["detail"], answer
    status, info, _ = call(secured, "GET", f"/jobs/{job_a}")
    assert info["ranks_registered"] == 2 and info["round"] == 0 and "released" in info
    assert info["released"] is False and info["results_in_round"] == 0, info
    assert "secret" not in json.dumps(info)
    secured.kill()
    secured.start()  # the secret survives a restart (stored as a digest)
    status, answer, _ = call(secured, "POST", f"/straggler/{job_a}", {"rank": 0, "slowdown": 5.0},
                             secret=secret_b)
    assert status == 403
    # The status page takes the token as a query (a browser sends no header).
    with urllib.request.urlopen(f"{secured.url}/?token={TOKEN}", timeout=10) as page:
        assert page.status == 200 and job_a in page.read().decode()
    store = open(secured.store, "rb").read() + open(secured.store + "-wal", "rb").read()
    assert secret_a.encode() not in store and TOKEN.encode() not in store


def test_unauthenticated_bodies_reserve_nothing(server_factory, tmp_path):
    """Issue 50.3: the credentials are checked on the header, before room for a body is
    reserved; 16 header-only POSTs announcing 1 MiB without the token used to hold the whole
    4 MiB budget (503 for every job until the body deadline)."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--token-file", str(token_file),
                                   "--max-inflight-bytes", str(4 << 20)])
    job_id, secret = new_job(server)
    hogs = []
    for i in range(16):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        wrong = "" if i % 2 else "X-Perseus-Job-Secret: 0123\r\n"  # no token either way
        sock.sendall(f"POST /result/{job_id} HTTP/1.1\r\nHost: x\r\n{wrong}"
                     "Content-Length: 1048576\r\n\r\n".encode())
        hogs.append(sock)
    status, answer, _ = call(server, "POST", f"/register_rank/{job_id}", rank_info(0, 2),
                             secret=secret)
    assert status == 200, answer
    for sock in hogs:
        assert sock.recv(4096).startswith(b"HTTP/1.1 401")
        sock.close()
    # A token holder without the job's secret is refused on the header too.
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(f"POST /result/{job_id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}"
                 "\r\nContent-Length: 1048576\r\n\r\n".encode())
    assert sock.recv(4096).startswith(b"HTTP/1.1 403")
    sock.close()


def test_jobs_without_a_secret_are_not_served_once_a_token_is_on(server_factory, tmp_path):
    """Issue 50.16: a job registered while the server had no token has no job secret; restarted
    with a token, it is failed with the reason (logged), not left open to every token holder."""
    server = server_factory("all-max", {"microbatches": 2})
    job_id = server.register_job(pp=2)
    server.kill()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server.args += ["--token-file", str(token_file)]
    server.start()
    status, job, _ = call(server, "GET", f"/jobs/{job_id}")
    assert status == 200 and job["state"] == "failed", job
    assert "before the cluster token was turned on" in job["error"], job
    status, answer, _ = call(server, "POST", f"/register_rank/{job_id}", rank_info(0, 2))
    assert status >= 400, answer
    assert f"job {job_id}: stored job cannot be restored: it was registered before the cluster " \
        "token" in server.log.read_text()
    new_job(server)  # new jobs get secrets as usual


def test_the_status_pages_links_keep_a_token_from_the_address(secured):
    """Issue 50.19: a browser opens the status page with ?token= (it cannot send the header);
    the page's links carry it, and the pages they lead to take it. Nothing else does."""
    job_id, _ = new_job(secured)
    with urllib.request.urlopen(f"{secured.url}/?token={TOKEN}", timeout=20) as resp:
        page = resp.read().decode()
    assert f'href="/jobs?token={TOKEN}"' in page and f'href="/metrics?token={TOKEN}"' in page
    assert f'href="/jobs/{job_id}?token={TOKEN}"' in page, page
    for path in ("/jobs", f"/jobs/{job_id}", "/metrics"):
        with urllib.request.urlopen(f"{secured.url}{path}?token={TOKEN}", timeout=20) as resp:
            assert resp.status == 200
        status, _, _ = call(secured, "GET", f"{path}?token=wrong", token=None)
        assert status == 401
    status, answer, _ = call(secured, "POST", f"/register_job?token={TOKEN}",
                             {"pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1},
                             token=None)
    assert status == 401, answer
    # Without the token, the health check says the server is up and nothing about its jobs.
    status, health, _ = call(secured, "GET", "/healthz", token=None)
    assert status == 200 and health["status"] == "ok" and "jobs" not in health, health


def test_the_server_warns_of_a_readable_token_file_and_clear_text(server_factory, tmp_path):
    """Issue 50.19: a token file other users may read, and a token sent in clear text to other
    hosts, are warned of at start."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    server = server_factory("all-max", {"microbatches": 2},
                            extra=["--token-file", str(token_file), "--address", "0.0.0.0"])
    log = server.log.read_text()
    assert f"--token-file {token_file} may be read by other users of this host" in log, log
    assert "reachable from other hosts without TLS" in log, log
    token_file.chmod(0o600)
    quiet = server_factory("all-max", {"microbatches": 2}, name="quiet",
                           extra=["--token-file", str(token_file)])
    log = quiet.log.read_text()
    assert "may be read by other users" not in log and "without TLS" not in log, log


def raw_get(server, path, token, source):
    """The status line and headers of one GET from the address `source`."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10,
                                  source_address=(source, 0)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                     "Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.decode(errors="replace")


def test_a_peer_that_keeps_failing_authentication_is_locked_out(secured):
    """Issue 50.19: more than 20 failed authentications within 10 s lock the peer address out
    for 10 s (429 with Retry-After, even with the right token, one log line); other peers go on."""
    for i in range(21):
        assert raw_get(secured, "/jobs", "wrong-token", "127.0.0.3").startswith("HTTP/1.1 401"), i
    locked = raw_get(secured, "/jobs", TOKEN, "127.0.0.3")
    assert locked.startswith("HTTP/1.1 429") and "Retry-After: 1" in locked, locked
    assert "too many failed authentications from 127.0.0.3" in locked
    assert raw_get(secured, "/jobs", TOKEN, "127.0.0.4").startswith("HTTP/1.1 200")
    assert raw_get(secured, "/healthz", "", "127.0.0.3").startswith("HTTP/1.1 200")
    log = secured.log.read_text()
    assert log.count("auth failure: more than 20 from 127.0.0.3 within 10 s") == 1, log
    assert log.count("auth failure: GET /jobs: wrong cluster token") == 21, log


def test_other_hosts_need_a_token_or_insecure(tmp_path):
    base = [PERSEUS, "serve", "--port", "0", "--store", str(tmp_path / "s.sqlite"),
            "--address", "0.0.0.0"]
    out = subprocess.run(base, capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "--insecure" in out.stderr and "--token-file" in out.stderr
    proc = subprocess.Popen(base + ["--insecure"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in proc.stdout.readline()
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert "no cluster token and --insecure" in err
