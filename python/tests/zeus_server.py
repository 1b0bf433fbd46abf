"""Zeus's own pipeline-frequency server (zeus 0.16's FastAPI app on uvicorn, from the project
virtual environment), for the tests that run it beside ours or against our client."""

import json
import os
import queue
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

ZEUS_APP = "zeus.optimizer.pipeline_frequency.server.router:app"


def zeus_server(workdir, scheduler, scheduler_args):
    """Starts Zeus's server with that scheduler (a name in Zeus's scheduler module) and its
    arguments (Zeus reads both from ZEUS_PFO_* variables), yields its URL, stops it."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    env = {**os.environ, "ZEUS_PFO_SCHEDULER": scheduler,
           "ZEUS_PFO_SCHEDULER_ARGS": json.dumps(scheduler_args),
           "ZEUS_PFO_DUMP_DATA": "false", "ZEUS_PFO_LOG_LEVEL": "INFO"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", ZEUS_APP, "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=workdir, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr] + [lines.put(None)],
                     daemon=True).start()
    url, seen = None, []
    while url is None:
        line = lines.get(timeout=120)
        if line is None:
            break
        seen.append(line)
        match = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
        url = match and match.group(1)
    if url is None:
        proc.kill()
        proc.wait()
        pytest.fail("Zeus's server did not start:\n" + "".join(seen))
    try:
        yield url
    finally:
        proc.terminate()  # uvicorn waits for requests still held in Zeus's barrier: not long
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def call(url, method, path, body=None, timeout=60):
    """(status, parsed JSON answer) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def served_schedules(url, pp, dp, tp=1):
    """Registers a job of those degrees (Zeus's JobInfo, no scheduler of its own) and its ranks
    in Megatron's order (tp fastest, then dp, then pp), asks for every rank's first schedule at
    once (the barrier) and returns {rank: (status, answer)}."""
    world = pp * dp * tp
    status, job_id = call(url, "POST", "/register_job", {
        "job_id": "", "pp_degree": pp, "dp_degree": dp, "tp_degree": tp, "world_size": world,
        "job_metadata": None})
    assert status == 200, job_id
    for rank in range(world):
        info = {"rank": rank, "dp_rank": (rank // tp) % dp, "pp_rank": rank // (tp * dp),
                "tp_rank": rank % tp, "available_frequencies": [1410, 1395, 1380, 1365]}
        status, answer = call(url, "POST", f"/register_rank/{job_id}", info)
        assert status == 200, answer
    out = {}

    def ask(rank):
        out[rank] = call(url, "GET", f"/schedule/{job_id}?rank={rank}")

    threads = [threading.Thread(target=ask, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return out
