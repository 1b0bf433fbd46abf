"""perseus.NvmlGpu through the real dlopen path, with the C++ tests' fake libnvidia-ml
($PERSEUS_FAKE_NVML; those tests are skipped without it)."""

import os
import time

import pytest

import perseus
from conftest import other_thread_resumes_during, train

FAKE = os.environ.get("PERSEUS_FAKE_NVML", "")
needs_fake = pytest.mark.skipif(not os.path.isfile(FAKE),
                                reason="PERSEUS_FAKE_NVML (the fake libnvidia-ml) not built")


@pytest.fixture(autouse=True)
def fast_fake_counter(monkeypatch):
    """These tests do not time the counter: refresh it every millisecond and make reads free
    (the fake's defaults model an H100: 100 ms refresh, 4 ms per read); device 0 is NVML's 0."""
    monkeypatch.setenv("FAKE_NVML_REFRESH_MS", "1")
    monkeypatch.setenv("FAKE_NVML_READ_MS", "0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_missing_library_raises():
    with pytest.raises(perseus.PerseusError, match="libnvidia-ml"):
        perseus.NvmlGpu(0, library="/nonexistent/libnvidia-ml.so.1")


@needs_fake
def test_fake_nvml_device(tmp_path, monkeypatch):
    log = tmp_path / "nvml.log"
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    gpu = perseus.NvmlGpu(0, library=FAKE)
    clocks = gpu.supported_clocks()
    assert clocks and clocks == sorted(clocks, reverse=True)
    e0 = gpu.total_energy()
    time.sleep(0.01)  # a few counter refreshes
    assert gpu.total_energy() > e0
    gpu.lock_clock(clocks[-1])
    gpu.reset_clock()
    text = log.read_text()
    assert f"nvmlDeviceSetGpuLockedClocks {clocks[-1]} {clocks[-1]}" in text
    assert "nvmlDeviceResetGpuLockedClocks" in text


@needs_fake
def test_bad_device_index_raises():
    with pytest.raises(perseus.PerseusError):
        perseus.NvmlGpu(3, library=FAKE)


@needs_fake
def test_optimizer_with_nvml_backend_restores_clocks(tmp_path, monkeypatch):
    log = tmp_path / "nvml.log"
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    gpu = perseus.NvmlGpu(0, library=FAKE)
    opt = perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu=gpu,
                                             report_every=1)
    train(opt, 2)
    assert len(opt.iterations) == 2
    assert all(t >= 0 and e >= 0 for t, e in opt.iterations)  # wall clock, NVML energy counter
    opt.close()
    assert "nvmlDeviceResetGpuLockedClocks" in log.read_text()


@needs_fake
def test_a_counter_read_lets_other_threads_run(monkeypatch):
    """A read blocks its caller (~4 ms on an H100) and must release the GIL meanwhile, or a
    Python thread polling the counter would stall the training loop."""
    monkeypatch.setenv("FAKE_NVML_READ_MS", "300")
    gpu = perseus.NvmlGpu(0, library=FAKE)
    resumed, read = other_thread_resumes_during(gpu.total_energy)
    assert read >= 0.3
    assert resumed < 0.15, f"this thread waited {resumed:.3f} s for a {read:.3f} s read"
