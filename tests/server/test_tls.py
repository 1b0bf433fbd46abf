"""TLS (issue 12): `perseus serve --tls-cert/--tls-key` serves HTTPS only; a job runs end to end
with the C++ client (simulate-training, one process per rank) and a token; clients verify the
certificate and its name."""
import json
import os
import re
import socket
import ssl
import subprocess
import urllib.request

import pytest

from conftest import PERSEUS, self_signed_certificate

TOKEN = "tls-cluster-token-0123456789"


@pytest.fixture
def tls_server(server_factory, tmp_path):
    cert, key = self_signed_certificate(tmp_path)
    (tmp_path / "token").write_text(TOKEN)
    context = ssl.create_default_context(cafile=cert)
    server = server_factory("all-max", {"microbatches": 4}, tls=context,
                            extra=["--tls-cert", cert, "--tls-key", key,
                                   "--token-file", str(tmp_path / "token")])
    server.cert = cert
    return server


def test_job_runs_end_to_end_over_tls_with_the_cpp_client(tls_server, tmp_path):
    assert tls_server.url.startswith("https://")
    env = dict(os.environ, PERSEUS_TOKEN=TOKEN, PERSEUS_CA_FILE=tls_server.cert)
    out = subprocess.run([PERSEUS, "simulate-training", "--server", tls_server.url, "--stages", "2",
                          "--microbatches", "4", "--iterations", "6", "--quiet", "--blocking-power", "83.64",
                          "--out", str(tmp_path / "run.json")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    run = json.loads((tmp_path / "run.json").read_text())
    assert "perseus: warning" not in out.stderr, out.stderr
    req_headers = {"Authorization": f"Bearer {TOKEN}"}
    with urllib.request.urlopen(urllib.request.Request(tls_server.url + "/jobs",
                                                       headers=req_headers),
                                context=tls_server.tls, timeout=10) as resp:
        jobs = json.loads(resp.read())
    assert len(jobs) == 1 and jobs[0]["ranks_registered"] == 2 and jobs[0]["round"] == 0
    assert run["job_id"] == jobs[0]["job_id"] and run["finished"] and not run["gave_up"], run
    assert len(run["iterations"]) == 6 and not any(i["degraded"] for i in run["iterations"])


def test_plain_http_and_untrusted_clients_are_refused(tls_server, tmp_path):
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert not sock.recv(4096).startswith(b"HTTP/1.1 200")
    status, health = tls_server.get("/healthz")
    assert status == 200 and health["status"] == "ok"
    # A client that trusts another CA fails the handshake and trains on at the default clock.
    (tmp_path / "other").mkdir()
    other_cert, _ = self_signed_certificate(tmp_path / "other")
    env = dict(os.environ, PERSEUS_TOKEN=TOKEN, PERSEUS_CA_FILE=other_cert)
    out = subprocess.run([PERSEUS, "simulate-training", "--server", tls_server.url, "--stages", "2",
                          "--microbatches", "4", "--iterations", "2", "--quiet", "--blocking-power", "83.64",
                          "--out", str(tmp_path / "run.json")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert "TLS handshake failed" in out.stderr and "certificate verify failed" in out.stderr, \
        out.stderr


def test_bad_certificate_files_are_one_line_errors(tmp_path):
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    for args, reason in [(["--tls-cert", str(tmp_path / "junk.pem")], "go together"),
                         (["--tls-cert", str(tmp_path / "junk.pem"), "--tls-key",
                           str(tmp_path / "junk.pem")], "--tls-cert: cannot use")]:
        out = subprocess.run([PERSEUS, "serve", "--port", "0", "--store",
                              str(tmp_path / "s.sqlite"), *args],
                             capture_output=True, text=True, timeout=30)
        errors = [line for line in out.stderr.splitlines() if line.startswith("perseus: error")]
        assert out.returncode != 0 and len(errors) == 1 and reason in errors[0], out.stderr


SLOW_RESOLVER = os.environ.get("PERSEUS_SLOW_RESOLVER", "")


@pytest.mark.skipif(not os.path.isfile(SLOW_RESOLVER),
                    reason="PERSEUS_SLOW_RESOLVER (the late-answering resolver) not set")
def test_the_client_resolves_the_server_name_once_and_within_its_deadline(server_factory,
                                                                           tmp_path):
    """Issue 50.17: a resolver that answers late (here 0.5 s a lookup) is asked once per client
    process, on a thread of its own within the request's deadline; its answer is kept for the
    job's every later request (before: one blocking lookup per request, 20 s with dead DNS
    servers)."""
    server = server_factory("all-max", {"microbatches": 4})
    log = tmp_path / "lookups.log"
    env = dict(os.environ, LD_PRELOAD=SLOW_RESOLVER, SLOW_RESOLVER_LOG=str(log),
               SLOW_RESOLVER_SECONDS="0.5")
    url = f"http://slow.perseus.test:{server.port}"
    out = subprocess.run([PERSEUS, "simulate-training", "--server", url, "--stages", "2",
                          "--microbatches", "4", "--iterations", "12", "--report-every", "2",
                          "--quiet", "--blocking-power", "83.64",
                          "--out", str(tmp_path / "run.json")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "perseus: warning" not in out.stderr, out.stderr
    _, jobs = server.get("/jobs")
    assert len(jobs) == 1 and jobs[0]["ranks_registered"] == 2, jobs
    # Each of the 2 rank processes looked the name up once for its many requests.
    assert log.read_text().splitlines() == ["slow.perseus.test"] * 2


def test_an_idle_tls_connection_costs_the_server_little_memory(tls_server):
    """Issue 50.9: an open TLS connection, after one answered request, cost the server about
    75 KB (Asio's SSL engine buffers and BIO pair, about 68 KB of it); now OpenSSL reads and
    writes the socket itself and releases its record buffers while the connection is idle."""
    request = (f"GET /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n").encode()

    def connect():
        sock = tls_server.tls.wrap_socket(socket.create_connection(("127.0.0.1", tls_server.port),
                                                                   timeout=10),
                                          server_hostname="127.0.0.1")
        sock.sendall(request)
        answer = b""
        while not answer.endswith(b"]"):
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        return sock

    for _ in range(20):  # the allocator's and OpenSSL's first allocations
        connect().close()
    before = rss_kb(tls_server.proc.pid)
    held = [connect() for _ in range(300)]
    per_connection = (rss_kb(tls_server.proc.pid) - before) / len(held)
    for sock in held:
        sock.close()
    assert per_connection < 40, f"{per_connection:.1f} KB per idle TLS connection"


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
