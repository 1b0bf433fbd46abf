"""End to end against a real `perseus serve` (skipped while the binary has no `serve`)."""

import csv
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

import perseus
from conftest import MeasuringOnly, train

MICROBATCHES = 3
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch_pipeline", "train.py")
FAKE = os.environ.get("PERSEUS_FAKE_NVML", "")


def serve_available(perseus_bin):
    try:
        res = subprocess.run([perseus_bin, "serve", "--help"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


@pytest.fixture
def server(perseus_bin, tmp_path):
    yield from serve(perseus_bin, tmp_path)


TOKEN = "python-client-token-0123456789"


@pytest.fixture
def secured_server(perseus_bin, tmp_path):
    """A server with a cluster token (its jobs get secrets)."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    yield from serve(perseus_bin, tmp_path, ["--token-file", str(tmp_path / "token")])


@pytest.fixture
def tls_server(perseus_bin, tmp_path):
    """An HTTPS server with a cluster token; yields (url, CA certificate file)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=perseus-test", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    (tmp_path / "token").write_text(TOKEN)
    for url in serve(perseus_bin, tmp_path, ["--token-file", str(tmp_path / "token"),
                                             "--tls-cert", str(cert), "--tls-key", str(key)]):
        yield url, str(cert)


def serve(perseus_bin, tmp_path, extra=()):
    """Starts `perseus serve` (all-max by default), yields its URL, stops it."""
    if not serve_available(perseus_bin):
        pytest.skip("`perseus serve --help` fails: no server command yet")
    cmd = [perseus_bin, "serve", "--port", "0", "--store", str(tmp_path / "store.db"),
           "--output-dir", str(tmp_path), "--data-dir", str(tmp_path), "--scheduler", "all-max",
           "--scheduler-args", json.dumps({"microbatches": MICROBATCHES}), *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    yield url
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

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(stages)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    assert not errors, errors
    assert not logs, logs
    job_id = results[0]["job_id"]
    assert job_id and all(r["job_id"] == job_id for r in results.values())
    for rank, r in results.items():
        assert not r["degraded"], rank
        assert r["rounds"] == sorted(r["rounds"]), r["rounds"]
        assert len(r["iterations"]) == iterations
    return job_id, results


def test_two_ranks_all_max(server, profile2):
    stages, iterations = 2, 6
    job_id, results = run_ranks(server, profile2, stages, iterations, report_every=2)
    for r in results.values():
        assert r["done"]  # all-max is final at once
        assert r["rounds"] == [0] * iterations
        assert r["clock"] == max(r["clocks"])  # the highest clock is locked

    status = get_json(f"{server}/jobs/{job_id}")
    assert status["job_id"] == job_id
    assert status["scheduler"] == "all-max"
    assert status["ranks_registered"] == stages
    assert status["round"] == 0
    assert status["state"] == "done"
    assert not status.get("error")
    assert job_id in json.dumps(get_json(f"{server}/jobs"))


def test_token_and_job_secret_end_to_end(secured_server, profile2, monkeypatch):
    """The client sends the cluster token and carries the job's secret with its id: two ranks
    share "<id>#<secret>" and finish the job; without the token they run degraded."""
    stages = 2
    job_id, results = run_ranks(secured_server, profile2, stages, 4, report_every=2, token=TOKEN)
    assert all(r["done"] for r in results.values())
    assert all(r["credential"].startswith(job_id + "#") and len(r["credential"]) == len(job_id) + 33
               for r in results.values())
    req = urllib.request.Request(f"{secured_server}/jobs/{job_id}",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.loads(resp.read())["state"] == "done"
    logs = []
    opt = perseus.PipelineFrequencyOptimizer(
        0, 0, 0, 0, 0, 1, 1, 1, 1, secured_server, gpu="sim", profile=profile2,
        counter="ideal", log=logs.append, retries=0)
    assert opt.degraded and "HTTP 401" in logs[0] and "cluster token" in logs[0]
    opt.close()
    monkeypatch.setenv("PERSEUS_TOKEN", TOKEN)  # the environment is enough
    opt = perseus.PipelineFrequencyOptimizer(
        0, 0, 0, 0, 0, 1, 1, 1, 1, secured_server, gpu="sim", profile=profile2,
        counter="ideal", log=logs.append, retries=0)
    assert not opt.degraded and "#" in opt.job_credential
    opt.close()


def test_python_client_over_tls(tls_server, profile2):
    url, ca_file = tls_server
    job_id, results = run_ranks(url, profile2, 2, 4, report_every=2, token=TOKEN,
                                ca_file=ca_file)
    assert all(r["done"] for r in results.values())
    logs = []  # the certificate names 127.0.0.1 only: the same server as "localhost" fails
    opt = perseus.PipelineFrequencyOptimizer(
        0, 0, 0, 0, 0, 1, 1, 1, 1, url.replace("127.0.0.1", "localhost"), gpu="sim",
        profile=profile2, counter="ideal", log=logs.append, retries=0, token=TOKEN,
        ca_file=ca_file)
    assert opt.degraded and "TLS handshake failed" in logs[0], logs
    opt.close()


def test_a_loop_that_leaves_its_schedule_is_not_silent(server, profile2):
    logs = []
    opt = perseus.PipelineFrequencyOptimizer(
        0, 0, 0, 0, 0, 1, 1, 1, 1, server, gpu="sim", profile=profile2, stage=0,
        counter="ideal", report_every=2, log=logs.append)
    assert not opt.degraded and opt.mismatched_iterations == 0
    train(opt, 1, ["forward"] * (2 * MICROBATCHES))  # forwards only: not the 1F1B order
    assert opt.degraded and opt.mismatched_iterations == 1 and not logs
    train(opt, 1, ["forward"] * (2 * MICROBATCHES))
    assert opt.mismatched_iterations == 2 and len(logs) == 1, logs
    assert "2 of this window's 2 iterations did not follow the schedule" in logs[0]
    assert f"forward x{MICROBATCHES}, backward x{MICROBATCHES}" in logs[0]
    opt.close()


def test_two_ranks_profiler_rounds_and_results(server, profile2, profile2_rows, tmp_path):
    """A per-job scheduler (the instruction profiler) sweeps 3 clocks, one round each: rounds
    advance, results are accepted, and the profile it writes matches the simulated GPUs'."""
    stages, report_every = 2, 2
    clocks = sorted(profile2_rows[(0, "forward")], reverse=True)[:3]
    out = tmp_path / "measured.csv"
    args = {"microbatches": MICROBATCHES, "max_frequency": clocks[0],
            "min_frequency": clocks[-1], "output": str(out), "skip_iterations": 0,
            "patience": 10, "max_windows": 1}
    job_id, results = run_ranks(server, profile2, stages, report_every * 5, report_every,
                                scheduler="profiler", scheduler_args=args)
    for r in results.values():
        assert r["done"]
        assert r["rounds"][0] == 0
        assert r["rounds"][-1] == len(clocks)  # one round per clock, then the final one
        assert set(range(len(clocks) + 1)) <= set(r["rounds"])

    status = get_json(f"{server}/jobs/{job_id}")
    assert status["scheduler"] == "profiler"
    assert status["round"] == len(clocks)
    assert status["state"] == "done"
    assert not status.get("error")
    last = status["last_results"]  # results of a complete round were accepted
    assert last["round"] == len(clocks) - 1
    assert [s["iterations"] for s in last["stages"]] == [report_every] * stages

    # Virtual time: what the client measured and reported is exactly the simulated profile.
    from conftest import read_rows
    measured = read_rows(out)
    for (stage, name), rows in measured.items():
        assert set(rows) == set(clocks)
        for mhz, (t, e) in rows.items():
            t0, e0 = profile2_rows[(stage, name)][mhz]
            assert t == pytest.approx(t0, rel=1e-6)
            assert e == pytest.approx(e0, rel=1e-6)


@pytest.mark.skipif(not os.path.isfile(FAKE), reason="PERSEUS_FAKE_NVML (the fake NVML) not set")
def test_profiler_records_the_clock_each_row_ran_at(server, tmp_path, monkeypatch):
    """One rank on the fake NVML, whose power limit holds the SM clock at 1200 MHz: the rows
    profiled at 1410, 1395 and 1380 MHz ran at 1200, and the profile says so in its columns and
    its summary; the 1005 MHz row ran at its clock. With patience 1 the sweep goes on past the
    capped clocks (their energies differ by noise only, which counts for nothing) to 1005 MHz."""
    monkeypatch.setenv("FAKE_NVML_POWER_W", "450")  # above the fake's 400 W power limit
    monkeypatch.setenv("FAKE_NVML_CAPPED_MHZ", "1200")
    monkeypatch.setenv("FAKE_NVML_READ_MS", "1")
    monkeypatch.setenv("FAKE_NVML_REFRESH_MS", "10")
    out = tmp_path / "capped.csv"
    # Windows of 0.16 s hold 16 refreshes of this counter: long enough (min_window 0).
    args = {"microbatches": 1, "output": str(out), "skip_iterations": 0, "max_windows": 1,
            "patience": 1, "min_window": 0}
    logs = []
    gpu = perseus.NvmlGpu(0, library=FAKE)
    opt = perseus.PipelineFrequencyOptimizer(
        0, 0, 0, 0, 0, 1, 1, 1, 1, server, gpu=gpu, scheduler="profiler",
        scheduler_args=args, report_every=4, log=logs.append)
    for _ in range(60):
        if opt.done:
            break
        with opt.step():
            for name, seconds in (("forward", 0.01), ("backward", 0.02)):
                with opt.instruction(name):  # compute bound: as long as the clock is low
                    time.sleep(0.001)  # the client's clock thread locks the round's clock
                    time.sleep(seconds * 1410 / gpu.sm_clock_mhz())
    assert opt.done, (opt.round, [line[:300] for line in logs])
    job_id = opt.job_id
    opt.close()

    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert {int(r["frequency"]) for r in rows} == {1410, 1395, 1380, 1005}, rows
    for r in rows:
        locked, measured = int(r["frequency"]), float(r["measured_clock_mhz"])
        assert measured == pytest.approx(min(locked, 1200), rel=0.03), r
        assert float(r["clock_held_down"]) == pytest.approx(1.0), r  # 450 W > 400 W throughout
    summary = json.loads((tmp_path / "capped.csv.json").read_text())
    below = {(r["instruction"], r["mhz"]) for r in summary["clocks_not_reached"]}
    assert below == {(i, mhz) for i in ("forward", "backward") for mhz in (1410, 1395, 1380)}
    assert all(r["measured_mhz"] <= 1200.5 for r in summary["clocks_not_reached"]), summary
    assert any("below its locked 1410 MHz" in line for line in logs), logs
    status = get_json(f"{server}/jobs/{job_id}")["scheduler_status"]
    assert status["clocks_not_reached"] == 6 and status["state"] == "done", status


def schedule_answers(server, status):
    """How many GET /schedule answers with `status` the server gave (its metrics)."""
    with urllib.request.urlopen(f"{server}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.search(r'^perseus_http_responses_total\{endpoint="schedule",status="%d"\} (\S+)$'
                      % status, text, re.M)
    return float(found.group(1)) if found else 0


class CounterThatStops(MeasuringOnly):
    """A GPU drawing 200 W on the wall clock whose energy counter read fails from `fail_after_s` on
    (as NVML's does once the GPU has fallen off the bus)."""

    def __init__(self, fail_after_s):
        self.t0, self.fail_after_s = time.monotonic(), fail_after_s

    def supported_clocks(self):
        return [1500, 1400, 1300, 1200, 1100, 1000, 900, 800]

    def now_s(self):
        return time.monotonic() - self.t0

    def total_energy_j(self):
        t = self.now_s()
        if t > self.fail_after_s:
            raise RuntimeError("GPU is lost")
        return 200.0 * t


def profile_until_the_counter_fails(server, gpu, out):
    """A profiler job on `gpu` (one window of 4 iterations per clock, min_window 0, output `out`)
    through 80 iterations of a 10 ms forward and a 20 ms backward. Checks that the job failed on
    the counter naming rank 0, wrote no profile of 0 J rows, and was said to have failed once,
    the client never asking again; that every iteration trained (and measured its time); and
    returns (the job's status, the client's log)."""
    args = {"microbatches": 1, "output": str(out), "skip_iterations": 0, "max_windows": 1,
            "patience": 100, "min_window": 0}
    logs = []
    opt = perseus.PipelineFrequencyOptimizer(
        0, 0, 0, 0, 0, 1, 1, 1, 1, server, gpu=gpu, scheduler="profiler", scheduler_args=args,
        report_every=4, sampler_period=0.005, log=logs.append)
    try:
        train(opt, 80, seconds={"forward": 0.01, "backward": 0.02})
        job_id, trained = opt.job_id, len(opt.iterations)
    finally:
        opt.close()  # never raises, also when the GPU is lost
    status = get_json(f"{server}/jobs/{job_id}")
    assert status["state"] == "failed", status
    assert ("the GPU energy counter of rank 0 (stage 0) did not change in 3 reporting windows in "
            "a row") in status["error"], status
    assert not out.exists()
    assert trained == 80
    assert sum("the job failed for good" in m for m in logs) == 1, logs
    assert schedule_answers(server, 500) == 1
    return status, logs


def test_profiler_gives_up_on_a_counter_that_stopped_and_training_goes_on(server, tmp_path):
    """The counter reads fail from 0.4 s on (each retry fails again): the windows after it saw no
    change, so their energies are unknown. The profiler measures such a clock again, then fails
    the job naming the rank, instead of writing rows of 0 J; the client says so and the loop
    trains on."""
    status, logs = profile_until_the_counter_fails(server, CounterThatStops(0.4),
                                                   tmp_path / "stopped.csv")
    assert status["scheduler_status"]["measured"] < 8, status  # the clocks before it stopped
    assert any("energy counter read failed" in m and "GPU is lost" in m for m in logs), logs
    assert any("did not change in 3 reporting windows" in m for m in logs), logs


@pytest.mark.skipif(not os.path.isfile(FAKE), reason="PERSEUS_FAKE_NVML (the fake NVML) not set")
def test_a_gpu_lost_mid_sweep_fails_the_job_and_never_the_training(server, tmp_path,
                                                                    monkeypatch):
    """The fake NVML's GPU falls off the bus 0.25 s in, before its sweep of 4 clocks in windows
    of 0.12 s can end: every query and setting fails with NVML_ERROR_GPU_IS_LOST from then on
    (counter and clock reads, clock locks, the resets at close). The client says so, reports its
    windows as unmeasured, the profiler fails the job naming the rank, and neither the loop nor
    close() raises."""
    monkeypatch.setenv("FAKE_NVML_LOST_AFTER_MS", "250")
    monkeypatch.setenv("FAKE_NVML_READ_MS", "1")
    monkeypatch.setenv("FAKE_NVML_REFRESH_MS", "10")
    _, logs = profile_until_the_counter_fails(server, perseus.NvmlGpu(0, library=FAKE),
                                              tmp_path / "lost.csv")
    lost = [m for m in logs if "GPU is lost" in m]
    assert any("energy counter read failed" in m for m in lost), logs


def test_example_against_server(server, perseus_bin):
    env = dict(os.environ, PERSEUS_BIN=perseus_bin)
    cmd = [sys.executable, EXAMPLE, "--server", server, "--stages", "2", "--iterations", "4",
           "--microbatches", str(MICROBATCHES), "--report-every", "2", "--check"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    m = re.search(r"^job (\S+):", res.stdout, re.M)
    assert m, res.stdout
    job_id = m.group(1)
    status = get_json(f"{server}/jobs/{job_id}")
    assert status["ranks_registered"] == 2
    assert "(degraded)" not in res.stdout, res.stdout
    assert "check passed" in res.stdout


def test_nvml_backend_locks_planned_clock(server, tmp_path, monkeypatch):
    """One rank on the fake libnvidia-ml: the all-max plan locks the highest clock through the
    NVML backend, and closing the optimizer resets it."""
    fake = os.environ.get("PERSEUS_FAKE_NVML", "")
    if not os.path.isfile(fake):
        pytest.skip("PERSEUS_FAKE_NVML (the fake libnvidia-ml) not built")
    log = tmp_path / "nvml.log"
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    monkeypatch.setenv("FAKE_NVML_REFRESH_MS", "0")  # counter exact at every read
    monkeypatch.setenv("FAKE_NVML_READ_MS", "0")
    gpu = perseus.NvmlGpu(0, library=fake)
    top = gpu.supported_clocks()[0]
    logs = []
    opt = perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, server, gpu=gpu,
                                             report_every=2, log=logs.append)
    train(opt, 4, one_f_one_b(1, 0, MICROBATCHES))
    # Windows of microseconds may see no counter change (said once); nothing else is wrong.
    assert not [m for m in logs if "energy counter did not change" not in m], logs
    assert opt.round == 0 and opt.done and not opt.degraded
    opt.close()
    text = log.read_text()
    assert f"nvmlDeviceSetGpuLockedClocks {top} {top}" in text
    lines = text.splitlines()
    last_lock = max(i for i, line in enumerate(lines)
                    if line.startswith("nvmlDeviceSetGpuLockedClocks"))
    assert "nvmlDeviceResetGpuLockedClocks" in lines[last_lock + 1:]  # restored on close
