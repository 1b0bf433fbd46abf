#!/usr/bin/python3
"""The server's largest answers (issue 50.8): registers N jobs (default 10,000, the --max-jobs
default) with 60 KB of metadata each, then for GET /metrics, GET /jobs and the status page
prints the answer's size, how long it took, and how long a /healthz sent while it was being
built took (what every other request waits while a large answer holds the event loop).

Usage: /usr/bin/python3 bench/server_big_answers_bench.py [jobs=10000] [perseus binary]"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
PERSEUS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "src", "perseus")


def main():
    with tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.Popen(
            [PERSEUS, "serve", "--port", "0", "--store", os.path.join(workdir, "store.sqlite"),
             "--output-dir", workdir, "--scheduler", "all-max", "--scheduler-args",
             '{"microbatches": 4}', "--log-level", "warn", "--max-jobs", str(JOBS)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        url = "http://127.0.0.1:" + re.search(r":(\d+) ", proc.stdout.readline()).group(1)
        try:
            measure(url)
        finally:
            proc.kill()
            proc.wait()


def measure(url):
    job = json.dumps({"job_id": "", "pp_degree": 8, "dp_degree": 1, "tp_degree": 1,
                      "world_size": 8, "job_metadata": "m" * 60000}).encode()
    begin = time.monotonic()
    for i in range(JOBS):
        urllib.request.urlopen(urllib.request.Request(url + "/register_job", data=job)).read()
        if sys.stderr.isatty() and i % 500 == 0:
            print(f"\r{i}/{JOBS} jobs registered", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"jobs {JOBS} registered_in_s {time.monotonic() - begin:.1f}")
    for name, path in (("metrics", "/metrics"), ("jobs", "/jobs"), ("status_page", "/")):
        begin = time.monotonic()
        size = len(urllib.request.urlopen(url + path).read())
        took = time.monotonic() - begin
        during = []

        def health():
            start = time.monotonic()
            urllib.request.urlopen(url + "/healthz").read()
            during.append(time.monotonic() - start)

        big = threading.Thread(target=lambda: urllib.request.urlopen(url + path).read())
        big.start()
        time.sleep(0.005)
        health()
        big.join()
        print(f"{name}_mb {size / 1e6:.1f} {name}_ms {took * 1e3:.0f} "
              f"healthz_during_ms {during[0] * 1e3:.0f}")


if __name__ == "__main__":
    main()
