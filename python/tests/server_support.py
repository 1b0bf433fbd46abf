"""Helpers for the tests against a real `perseus serve`: starting one, reading its JSON and
metrics, and ranks that train against it in threads."""

import json
import queue
import re
import subprocess
import threading
import urllib.request

import pytest

import perseus
from conftest import train

MICROBATCHES = 3


def serve_available(perseus_bin):
    try:
        res = subprocess.run([perseus_bin, "serve", "--help"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0



@pytest.fixture
def server(perseus_bin, tmp_path):
    """A server (all-max); yields its URL."""
    yield from serve(perseus_bin, tmp_path)


@pytest.fixture
def server_no_schedule(perseus_bin, tmp_path):
    """A server (all-max) whose default scheduler names no schedule: jobs bring their order
    (pipeline_order, as the framework adapters send it); yields its URL."""
    yield from serve(perseus_bin, tmp_path, scheduler_args=None)


def serve(perseus_bin, tmp_path, extra=(), scheduler="all-max",
          scheduler_args={"microbatches": MICROBATCHES}, argv=None):  # noqa: B006
    """Starts `perseus serve` with that default scheduler (arguments None: none given), or the
    whole command line `argv` (run in tmp_path), yields its URL, stops it."""
    if not serve_available(perseus_bin):
        pytest.skip("`perseus serve --help` fails: no server command yet")
    cmd = [perseus_bin, "serve", "--port", "0", "--store", str(tmp_path / "store.db"),
           "--output-dir", str(tmp_path), "--data-dir", str(tmp_path), "--scheduler", scheduler,
           *(["--scheduler-args", json.dumps(scheduler_args)] if scheduler_args is not None
             else []), *extra]
    if argv is not None:
        cmd = list(argv)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    lines = queue.Queue()

    def pump(stream, tag):
        for line in stream:
            lines.put((tag, line))
        lines.put((tag, None))

    for stream, tag in ((proc.stdout, "out"), (proc.stderr, "err")):
        threading.Thread(target=pump, args=(stream, tag), daemon=True).start()
    seen, url = [], None
    try:
        while url is None:
            tag, line = lines.get(timeout=30)
            if line is None:
                if proc.poll() is not None:
                    break
                continue
            seen.append(line)
            m = re.search(r"listening on (https?://127\.0\.0\.1:\d+)", line)
            if tag == "out" and m:
                url = m.group(1)
    except queue.Empty:
        pass
    if url is None:
        proc.kill()
        proc.wait()
        pytest.fail(f"server did not start: {' '.join(cmd)}\n{''.join(seen)}")
    try:
        yield url
    finally:  # also when the generator is closed (GeneratorExit at the yield), not only resumed
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()



def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode())


def one_f_one_b(stages, stage, microbatches):
    order, f, b = [], 0, 0
    for _ in range(min(stages - stage, microbatches)):
        order.append("forward")
        f += 1
    while b < microbatches:
        order.append("backward")
        b += 1
        if f < microbatches:
            order.append("forward")
            f += 1
    return order


class ShareJobId:
    """Thread-based stand-in for torch.distributed's broadcast of rank 0's job id."""

    def __init__(self):
        self.event = threading.Event()
        self.job_id = ""

    def __call__(self, job_id):
        if job_id:
            self.job_id = job_id
            self.event.set()
            return job_id
        self.event.wait(60)
        return self.job_id


def on_rank_threads(rank_main, ranks, errors):
    """Runs rank_main(rank) for each of `ranks` ranks on a thread of its own; fails when one hung
    or `errors` (which rank_main appends to) is not empty."""
    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    assert not errors, errors


def run_ranks(server, profile, stages, iterations, report_every, **kwargs):
    """Runs `stages` ranks (one pipeline, one thread each) with simulated GPUs in virtual time
    through `iterations` 1F1B iterations; returns per-rank results and the warnings logged."""
    share = ShareJobId()
    results, errors, logs = {}, [], []

    def rank_main(rank):
        try:
            opt = perseus.PipelineFrequencyOptimizer(
                rank, 0, rank, 0, 0, 1, stages, 1, stages, server,
                json.dumps({"test": "two_ranks"}), gpu="sim", profile=profile, counter="ideal",
                blocking_power=83.64, report_every=report_every, share_job_id=share,
                barrier_timeout=60.0, log=logs.append, **kwargs)
            rounds = []
            for _ in range(iterations):
                train(opt, 1, one_f_one_b(stages, rank, MICROBATCHES))
                rounds.append(opt.round)
            results[rank] = dict(job_id=opt.job_id, credential=opt.job_credential,
                                 rounds=rounds, done=opt.done,
                                 degraded=opt.degraded, iterations=opt.iterations,
                                 clock=opt.sim.current_clock("forward"),
                                 clocks=opt.sim.supported_clocks())
            opt.close()
        except BaseException as e:  # reported in the main thread
            errors.append((rank, repr(e)))

    on_rank_threads(rank_main, stages, errors)
    assert not logs, logs
    job_id = results[0]["job_id"]
    assert job_id and all(r["job_id"] == job_id for r in results.values())
    for rank, r in results.items():
        assert not r["degraded"], rank
        assert r["rounds"] == sorted(r["rounds"]), r["rounds"]
        assert len(r["iterations"]) == iterations
    return job_id, results


def schedule_answers(server, status):
    """How many GET /schedule answers with `status` the server gave (its metrics)."""
    with urllib.request.urlopen(f"{server}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.search(r'^perseus_http_responses_total\{endpoint="schedule",status="%d"\} (\S+)$'
                      % status, text, re.M)
    return float(found.group(1)) if found else 0
