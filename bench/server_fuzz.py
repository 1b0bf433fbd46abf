#!/usr/bin/python3
"""Fuzzes a live `perseus serve` on loopback with mutated requests (issue 12): byte flips and
insertions, invalid UTF-8, broken JSON structure, deep nesting, out-of-range numbers, wrong types,
bad request lines, headers and queries, against every endpoint of a job that is really running.
Checks that the server never exits and that /healthz answers throughout; prints the request
count, the answers per status class and the crash count (must be 0).

Usage: /usr/bin/python3 bench/server_fuzz.py [requests=100000] [perseus binary] [seed=1]"""
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOTAL = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
PERSEUS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "src", "perseus")
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 1
THREADS = 4


def start_server(workdir):
    log = open(os.path.join(workdir, "server.log"), "w")
    proc = subprocess.Popen([PERSEUS, "serve", "--port", "0", "--store",
                             os.path.join(workdir, "store.sqlite"), "--output-dir",
                             os.path.join(workdir, "out"), "--scheduler", "all-max",
                             "--scheduler-args", '{"microbatches": 2}', "--log-level", "error",
                             "--max-jobs", "1000000"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    return proc, int(line.split("http://127.0.0.1:")[1].split()[0])


def call(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def valid_requests(job_id):
    """Well-formed requests of every endpoint: the seeds the mutations start from."""
    rank = {"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0,
            "available_frequencies": [1410, 1395]}
    result = {"rank": 0, "round": 0, "iter_time": [0.5, 0.5], "iter_energy": [100.0, 100.0],
              "time_breakdown": {"forward": [[0.1, 0.1]], "backward": [[0.2, 0.2]]},
              "energy_breakdown": {"forward": [[20.0, 20.0]], "backward": [[40.0, 40.0]]},
              "energy_stderr": {"forward": 0.1}, "attribution": "fit"}
    job = {"job_id": "", "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1,
           "job_metadata": "fuzz", "scheduler": "all-max", "scheduler_args": {"microbatches": 2}}
    return [("POST", "/register_job", json.dumps(job)),
            ("POST", f"/register_rank/{job_id}", json.dumps(rank)),
            ("GET", f"/schedule/{job_id}?rank=0&round=0", ""),
            ("POST", f"/result/{job_id}", json.dumps(result)),
            ("POST", f"/straggler/{job_id}", json.dumps({"rank": 0, "slowdown": 1.5})),
            ("GET", f"/jobs/{job_id}", ""), ("GET", "/jobs", ""), ("GET", "/healthz", ""),
            ("GET", "/", "")]


NASTY = [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"%ff", b"%00", b"1e400",
         b"-1e400", b"18446744073709551616", b"-0", b"NaN", b"null", b"[]", b"{}", b'"', b"\\",
         b"\\ud800", b"[" * 200, b"{" * 100, b"\r\n", b"\r\n\r\n", b" " * 1000, b"9" * 400]


def mutate(rng, method, path, body):
    """One mutated request as raw bytes."""
    path_b, body_b = path.encode(), body.encode()
    kind = rng.randrange(9)
    if kind == 0:  # flip bytes of the body
        b = bytearray(body_b or b"{}")
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        body_b = bytes(b)
    elif kind == 1:  # insert a nasty token into the body
        at = rng.randrange(len(body_b) + 1)
        body_b = body_b[:at] + rng.choice(NASTY) + body_b[at:]
    elif kind == 2:  # replace a JSON value with something of another type or range
        try:
            value = json.loads(body or "{}")
            if isinstance(value, dict) and value:
                key = rng.choice(list(value))
                value[key] = rng.choice([None, -1, 2**63, 1e308, "x" * rng.randint(0, 3000), [],
                                         {}, [[[[1]]]], True, "\u0000", -2**31, 0.5])
            body_b = json.dumps(value).encode()
        except ValueError:
            pass
    elif kind == 3:  # deep or wide structure
        depth = rng.choice([10, 63, 64, 65, 1000, 20000])
        body_b = b'{"rank": ' + b"[" * depth + b"]" * depth + b"}"
    elif kind == 4:  # mangle the path or query
        at = rng.randrange(len(path_b) + 1)
        path_b = path_b[:at] + rng.choice(NASTY + [b"?rank=", b"&round=-5", b"/..", b"%"]) + \
            path_b[at:]
        path_b = path_b.replace(b" ", b"%20").replace(b"\r", b"").replace(b"\n", b"")
    elif kind == 5:  # bad method
        method = rng.choice(["PUT", "DELETE", "G\xffET", "", "POSTX", "get"])
    elif kind == 6:  # lie about the length
        return header(method, path_b, rng.choice([0, 1, len(body_b) + 10, 10**12, -1])) + body_b
    elif kind == 7:  # garbage headers
        return (method.encode("latin-1") + b" " + path_b + b" HTTP/1.1\r\n" +
                bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))) + b"\r\n\r\n")
    else:  # random bytes as the whole request
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
    return header(method, path_b, len(body_b)) + body_b


def header(method, path_b, length):
    return (method.encode("latin-1", "replace") + b" " + path_b + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: " + str(length).encode() + b"\r\n\r\n")


def send(port, data):
    """Status class of the answer ('2xx', '4xx', ...), 'closed' or 'timeout'."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            first = sock.recv(16)
        except socket.timeout:
            return "timeout"
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        return first[9:10].decode("latin-1") + "xx" if first.startswith(b"HTTP/1.1 ") else "closed"


def main():
    workdir = tempfile.mkdtemp()
    proc, port = start_server(workdir)
    job_id = call(port, "POST", "/register_job", {"job_id": "", "pp_degree": 1, "dp_degree": 1,
                                                  "tp_degree": 1, "world_size": 1})
    seeds = valid_requests(job_id)
    counts, lock, done = {}, threading.Lock(), [0]
    health_failures = []

    def worker(index):
        rng = random.Random(SEED * 1000 + index)
        while True:
            with lock:
                if done[0] >= TOTAL or proc.poll() is not None:
                    return
                done[0] += 1
            outcome = send(port, mutate(rng, *rng.choice(seeds)))
            with lock:
                counts[outcome] = counts.get(outcome, 0) + 1

    def watchdog():
        while any(t.is_alive() for t in threads):
            try:
                call(port, "GET", "/healthz")
            except Exception as err:  # noqa: BLE001 - any failure to answer counts
                health_failures.append(repr(err))
            time.sleep(0.2)

    begin = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    dog = threading.Thread(target=watchdog)
    dog.start()
    last = 0
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        if sys.stderr.isatty() and done[0] - last >= 1000:
            last = done[0]
            print(f"\r{done[0]}/{TOTAL} requests", end="", file=sys.stderr, flush=True)
    for t in threads + [dog]:
        t.join()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    crashes = 0 if proc.poll() is None else 1
    print(f"requests {done[0]}")
    print(f"seconds {time.monotonic() - begin:.1f}")
    print("answers " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    print(f"healthz_failures {len(health_failures)}")
    print(f"crashes {crashes}")
    if proc.poll() is None:
        proc.kill()
    else:
        print(open(os.path.join(workdir, "server.log")).read()[-2000:], file=sys.stderr)
    sys.exit(1 if crashes or health_failures or counts.get("5xx") else 0)


if __name__ == "__main__":
    main()
