"""End to end against a real `perseus serve` (skipped while the binary has no `serve`)."""

import csv
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest

import perseus
from conftest import train
from server_support import MICROBATCHES, get_json, one_f_one_b, run_ranks, serve
from server_support import server  # noqa: F401  (a fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch_pipeline", "train.py")
FAKE = os.environ.get("PERSEUS_FAKE_NVML", "")


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
    assert status["simulated_ranks"] == stages  # SimGpu's ranks say so when they register
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
            "min_frequency": clocks[-1], "output": out.name, "skip_iterations": 0,
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
    # Results of complete rounds were accepted, the final round's too (its first window).
    last = status["last_results"]
    assert last["round"] == len(clocks)
    assert [s["iterations"] for s in last["stages"]] == [report_every] * stages

    # Virtual time: what the client measured and reported is exactly the simulated profile.
    from conftest import read_rows
    measured = read_rows(tmp_path / job_id / out.name)  # the job's folder in --output-dir
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
    args = {"microbatches": 1, "output": out.name, "skip_iterations": 0, "max_windows": 1,
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

    with open(tmp_path / job_id / out.name) as f:
        rows = list(csv.DictReader(f))
    assert {int(r["frequency"]) for r in rows} == {1410, 1395, 1380, 1005}, rows
    for r in rows:
        locked, measured = int(r["frequency"]), float(r["measured_clock_mhz"])
        assert measured == pytest.approx(min(locked, 1200), rel=0.03), r
        assert float(r["clock_held_down"]) == pytest.approx(1.0), r  # 450 W > 400 W throughout
    summary = json.loads((tmp_path / job_id / "capped.csv.json").read_text())
    below = {(r["instruction"], r["mhz"]) for r in summary["clocks_not_reached"]}
    assert below == {(i, mhz) for i in ("forward", "backward") for mhz in (1410, 1395, 1380)}
    assert all(r["measured_mhz"] <= 1200.5 for r in summary["clocks_not_reached"]), summary
    assert any("below its locked 1410 MHz" in line for line in logs), logs
    job = get_json(f"{server}/jobs/{job_id}")
    assert job["simulated_ranks"] == 0, job  # an NVML GPU is no simulated one
    status = job["scheduler_status"]
    assert status["clocks_not_reached"] == 6 and status["state"] == "done", status


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
    # The clock thread applies the lock on its own time (close() drops a lock still pending:
    # it would be reset at once); wait for it.
    lock = f"nvmlDeviceSetGpuLockedClocks {top} {top}"
    deadline = time.monotonic() + 10
    while lock not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.01)
    opt.close()
    text = log.read_text()
    assert lock in text
    lines = text.splitlines()
    last_lock = max(i for i, line in enumerate(lines)
                    if line.startswith("nvmlDeviceSetGpuLockedClocks"))
    assert "nvmlDeviceResetGpuLockedClocks" in lines[last_lock + 1:]  # restored on close
