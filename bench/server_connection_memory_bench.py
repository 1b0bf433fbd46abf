#!/usr/bin/python3
"""Memory one open connection costs `perseus serve` (issue 50.9): opens N keep-alive connections
to a server on loopback, each after one answered request (GET /jobs), over plain HTTP and over
TLS, and prints the server's RSS before and after and the difference per connection.

Usage: /usr/bin/python3 bench/server_connection_memory_bench.py [connections=1000] [perseus]"""
import os
import re
import resource
import socket
import ssl
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
PERSEUS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "src", "perseus")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def certificate(directory):
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key,
                    "-out", cert], check=True, capture_output=True)
    return cert, key


def measure(workdir, tls):
    extra, context = [], None
    if tls:
        cert, key = certificate(workdir)
        extra = ["--tls-cert", cert, "--tls-key", key]
        context = ssl.create_default_context(cafile=cert)
    store = os.path.join(workdir, f"store-{int(tls)}.sqlite")
    proc = subprocess.Popen([PERSEUS, "serve", "--port", "0", "--store", store, "--output-dir",
                             workdir, "--log-level", "warn", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(re.search(r":(\d+) ", proc.stdout.readline()).group(1))
    request = b"GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n"
    held = []

    def connect():
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if context:
            sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n[]" not in answer:
            answer += sock.recv(4096)
        return sock

    for _ in range(20):  # warm-up: the allocator's and OpenSSL's first allocations
        connect().close()
    before = rss_kb(proc.pid)
    for _ in range(COUNT):
        held.append(connect())
    after = rss_kb(proc.pid)
    for sock in held:
        sock.close()
    proc.kill()
    proc.wait()
    name = "tls" if tls else "plain"
    print(f"{name}_rss_before_mb {before / 1024:.1f}")
    print(f"{name}_rss_after_mb {after / 1024:.1f}")
    print(f"{name}_kb_per_connection {(after - before) / COUNT:.1f}")


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"connections {COUNT}")
    with tempfile.TemporaryDirectory() as workdir:
        measure(workdir, False)
        measure(workdir, True)


if __name__ == "__main__":
    main()
