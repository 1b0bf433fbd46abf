"""The client's stall is bounded whatever the server does (issue 12): a training process (a real
child process, simulated GPU) against a server that never answers, one that answers one byte a
second, and one that sends a 1 GiB answer. Each window boundary may block at most the stall
bound, and the process's peak RSS grows by less than 100 MB."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

STALL_BOUND = 1.0

CHILD = r"""
import json, resource, sys, time
import perseus
url, profile = sys.argv[1], sys.argv[2]
rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
begin = time.monotonic()
opt = perseus.PipelineFrequencyOptimizer(
    0, 0, 0, 0, 0, 1, 2, 1, 2, url, gpu="sim", profile=profile, counter="ideal",
    report_every=1, request_timeout=30.0, barrier_timeout=30.0, retries=3,
    stall_bound=float(sys.argv[3]), max_skipped_windows=0, log=lambda line: None)
stalls = [time.monotonic() - begin]
for _ in range(3):
    begin = time.monotonic()
    with opt.step():
        for name in ("forward", "backward"):
            with opt.instruction(name):
                pass
    stalls.append(time.monotonic() - begin)
rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"stalls": stalls, "rss_growth_mb": (rss_after - rss_before) / 1024.0,
                  "degraded": opt.degraded}))
"""


class HostileServer:
    """Accepts every connection and answers it with `behaviour(conn)` on its own thread."""

    def __init__(self, behaviour):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.behaviour = behaviour
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn):
        try:
            conn.recv(65536)
            self.behaviour(conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


def never_answers(conn, stop):
    stop.wait(60)


def one_byte_a_second(conn, stop):
    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnull":
        conn.sendall(bytes([byte]))
        if stop.wait(1.0):
            return


def one_gib_answer(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1073741824\r\n\r\n")
    chunk = b"[" * (1 << 20)
    for _ in range(1024):
        if stop.is_set():
            return
        conn.sendall(chunk)


def one_gib_without_length(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    chunk = b" " * (1 << 20)
    for _ in range(1024):
        if stop.is_set():
            return
        conn.sendall(chunk)


@pytest.mark.parametrize("behaviour", [never_answers, one_byte_a_second, one_gib_answer,
                                       one_gib_without_length])
def test_training_stall_is_bounded(behaviour, profile2):
    server = HostileServer(behaviour)
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, server.url, profile2, str(STALL_BOUND)],
                             capture_output=True, text=True, timeout=120, env=os.environ)
    finally:
        server.close()
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["degraded"]
    # Constructor and every window boundary: at most the bound (plus scheduling slack).
    assert max(report["stalls"]) < STALL_BOUND + 0.5, report
    assert report["rss_growth_mb"] < 100, report
