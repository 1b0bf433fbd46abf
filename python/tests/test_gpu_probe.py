"""perseus.gpu_probe through the real dlopen path, with the C++ tests' fake libnvidia-ml
($PERSEUS_FAKE_NVML; those tests are skipped without it): the fields of `perseus gpu probe
--json`, measurements that match the fake's configured counter, and no mutating NVML call."""

import os
import subprocess
import sys

import pytest

import perseus

FAKE = os.environ.get("PERSEUS_FAKE_NVML", "")
needs_fake = pytest.mark.skipif(not os.path.isfile(FAKE),
                                reason="PERSEUS_FAKE_NVML (the fake libnvidia-ml) not built")
MUTATING = ("nvmlDeviceSet", "nvmlDeviceReset", "nvmlDeviceClear", "nvmlSystemSet")


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """A 2-device fake with a 40 ms counter refresh, 2 ms reads and 180 W; returns the call log."""
    log = tmp_path / "nvml.log"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name, value in {"FAKE_NVML_LOG": str(log), "FAKE_NVML_DEVICES": "2",
                        "FAKE_NVML_REFRESH_MS": "40", "FAKE_NVML_READ_MS": "2",
                        "FAKE_NVML_POWER_W": "180"}.items():
        monkeypatch.setenv(name, value)
    return log


@needs_fake
def test_probe_measures_the_fake_counter_read_only(fake_env, monkeypatch):
    uuid = "GPU-00000001-fa4e-4000-8000-000000000001"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", uuid)
    p = perseus.gpu_probe(device=0, library=FAKE, duration=0.8)
    assert p["name"] == "Fake NVIDIA H100 80GB HBM3"
    assert p["driver"] == "580.159.04"
    assert (p["uuid"], p["nvml_index"], p["cuda_index"]) == (uuid, 1, 0)
    assert p["sm_clocks_mhz"] == [1410, 1395, 1380, 1005]
    assert p["refresh_period_s"]["mean"] == pytest.approx(0.040, rel=0.1)
    assert 0.8 * 0.002 <= p["read_cost_s"]["mean"] <= 3 * 0.002
    assert p["power_w"]["mean"] == pytest.approx(180, rel=0.02)
    assert p["power_w"]["counter_slope"] == pytest.approx(180, rel=0.02)
    assert p["counter_reads"] > p["counter_changes"] >= 10
    assert p["sm_clock_mhz"] == {"mean": 1410, "min": 1410, "max": 1410}
    assert p["clock_event_reasons"] == []  # 180 W, below the fake's 400 W limit
    assert p["power_limit_w"] == {"enforced": 400.0, "default": 400.0}
    lines = fake_env.read_text().splitlines()
    assert lines.count("nvmlDeviceGetTotalEnergyConsumption") == p["counter_reads"]
    assert not [line for line in lines if line.startswith(MUTATING)]


@needs_fake
def test_nvml_gpu_reads_clock_power_and_reasons_without_changing_anything(fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_POWER_W", "420")  # above the fake's 400 W power limit
    gpu = perseus.NvmlGpu(0, FAKE)
    assert gpu.sm_clock_mhz() == 1410
    assert gpu.power_usage_w() == pytest.approx(420)
    assert gpu.clock_event_reasons() == ["sw_power_cap"]
    assert (gpu.power_limit_w(), gpu.default_power_limit_w()) == (400.0, 400.0)
    assert not [line for line in fake_env.read_text().splitlines() if line.startswith(MUTATING)]


@needs_fake
def test_probe_errors_raise(fake_env, monkeypatch):
    with pytest.raises(perseus.PerseusError, match="NVML device 5"):
        perseus.gpu_probe(device=5, library=FAKE, duration=0.1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0000000")
    with pytest.raises(perseus.PerseusError, match="is a prefix of 2 NVML devices' UUIDs"):
        perseus.gpu_probe(library=FAKE, duration=0.1)
    with pytest.raises(perseus.PerseusError, match="probe duration"):
        perseus.gpu_probe(library=FAKE, duration=-1)


def test_probe_without_a_library_raises():
    with pytest.raises(perseus.PerseusError, match="cannot load NVML"):
        perseus.gpu_probe(library="/nonexistent/libnvidia-ml.so.1", duration=0.1)


HUNG_PROBE = """
import sys, time
import perseus

start = time.monotonic()
try:
    perseus.gpu_probe(library=sys.argv[1], duration=0.1, timeout=0.5)
except perseus.PerseusError as error:
    print("raised", time.monotonic() - start, error, flush=True)
"""


@needs_fake
def test_a_driver_that_does_not_answer_raises_after_the_timeout(fake_env, tmp_path):
    """The fake blocks every device call while the hang file exists, as NVML does on a GPU that
    has fallen off the bus: the probe raises once `timeout` has passed after `duration`, and the
    process still ends (the blocked call stays on a thread of its own). In a child process: the call
    left behind keeps its NVML session open."""
    hang = tmp_path / "hang"
    hang.touch()
    env = dict(os.environ, FAKE_NVML_HANG_FILE=str(hang))
    run = subprocess.run([sys.executable, "-c", HUNG_PROBE, FAKE], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("raised "), run.stdout + run.stderr
    took = float(run.stdout.split()[1])
    assert took >= 0.6, run.stdout  # not before duration + timeout (a blocked probe never raises)
    assert "the GPU driver did not answer: the probe had not finished 0.5 s after" in run.stdout


def test_a_bad_timeout_is_refused():
    with pytest.raises(perseus.PerseusError,
                       match="probe timeout must be a positive number of seconds, got 0"):
        perseus.gpu_probe(timeout=0)
