"""perseus.NvmlGpu through the real dlopen path, with the C++ tests' fake libnvidia-ml
($PERSEUS_FAKE_NVML; those tests are skipped without it)."""

import os
import shutil
import subprocess
import sys
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


def test_gpu_nvml_without_a_driver_suggests_the_simulated_gpu():
    """Issue 51.5: gpu="nvml" on a machine without NVIDIA's driver said only that NVML cannot
    be loaded; the error now says how to run without a GPU."""
    import ctypes
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        pytest.skip("this machine has an NVIDIA driver")
    except OSError:
        pass
    with pytest.raises(perseus.PerseusError, match='gpu="sim", profile='):
        perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, "", gpu="nvml")


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
    with pytest.raises(perseus.PerseusError, match=r"NVML device 3: no such device: NVML lists"):
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


@needs_fake
def test_a_window_starting_between_refreshes_measures_the_true_power(monkeypatch):
    """The fake's counter refreshes every 100 ms from its session's start, at a constant 300 W, as
    a real counter refreshes on its own schedule. A sampler started halfway between two refreshes
    first reads a value 50 ms old; the window must still come out at 300 W."""
    monkeypatch.setenv("FAKE_NVML_REFRESH_MS", "100")
    monkeypatch.setenv("FAKE_NVML_READ_MS", "4")
    monkeypatch.setenv("FAKE_NVML_POWER_W", "300")
    gpu = perseus.NvmlGpu(0, library=FAKE)
    time.sleep(0.15)
    # One window of 1.2 s (12 refreshes): a sampler that a loaded machine delays by tens of ms
    # misplaces a change by that much at the window's ends; in a 0.6 s window that was a 6 %
    # error once (a CI run beside a compiler), and a longer window halves it.
    opt = perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu=gpu,
                                             observe=True, report_every=40)
    train(opt, 40, seconds={"forward": 0.01, "backward": 0.02})
    assert opt.iterations
    trace = opt.last_window_trace
    opt.close()
    # An NvmlGpu made in Python passes its counter's lag on, as gpu="nvml" does.
    assert trace["counter_lag_s"] == perseus.NVML_COUNTER_LAG_S
    assert trace["counter_window_s"] == perseus.NVML_COUNTER_WINDOW_S
    for method in ("overlap", "busy-overlap"):
        a = perseus.attribute(trace, method)
        for key in a["keys"]:
            assert key["power_w"] == pytest.approx(300.0, rel=0.05), (method, key)
        # Charged the whole first refresh, the first instruction drew about twice the power.
        powers = [e / (s[1] - s[0]) for e, s in zip(a["span_energy_j"], trace["spans"])]
        assert powers[0] == pytest.approx(300.0, rel=0.25), (method, powers[:4])


@needs_fake
def test_the_window_reports_the_clock_each_instruction_ran_at(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_READ_MS", "1")
    monkeypatch.setenv("FAKE_NVML_POWER_W", "450")  # above the fake's 400 W limit
    monkeypatch.setenv("FAKE_NVML_CAPPED_MHZ", "1300")
    opt = perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None,
                                             gpu=perseus.NvmlGpu(0, library=FAKE),
                                             observe=True, report_every=5)
    train(opt, 5, seconds={"forward": 0.01, "backward": 0.01})  # one window
    clocks = opt.last_window["clocks"]
    opt.close()
    assert set(clocks) == {"forward", "backward"}
    for name, c in clocks.items():
        assert c["samples"] >= 5, (name, c)
        assert (c["mean_mhz"], c["held_down_share"], c["locked_mhz"]) == (1300, 1.0, 0), name


# A child process: dlopen finds the fake as libnvidia-ml.so.1 through LD_LIBRARY_PATH, as the
# default gpu="nvml" finds the driver's. torch here has no CUDA, so the child stands in CUDA's
# answers (initialized, device 0 is the GPU of this UUID) on torch.cuda itself.
_OPENS_BY_UUID = """
import torch, perseus
torch.cuda.is_initialized = lambda: True
torch.cuda.get_device_properties = lambda device: type("P", (), {"uuid": UUID})()
with perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, observe=True) as opt:
    print(opt.gpu.nvml_index(), opt.gpu.uuid())
torch.cuda.is_initialized = lambda: False
with perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, observe=True) as opt:
    print(opt.gpu.nvml_index(), opt.gpu.uuid())
"""


@needs_fake
@pytest.mark.parametrize("uuid", ["00000002-fa4e-4000-8000-000000000002",
                                  "GPU-00000002-FA4E-4000-8000-000000000002"])
def test_gpu_nvml_opens_the_device_whose_uuid_cuda_reports(uuid):
    # Where CUDA and NVML number devices differently (mixed GPUs in CUDA's fastest-first order,
    # MPS), CUDA_VISIBLE_DEVICES=0 would name NVML's device 0, not the GPU the training computes
    # on; with CUDA initialized the client opens the device of the UUID torch reports (as torch
    # writes it, without "GPU-", or any case), and without, it maps CUDA_VISIBLE_DEVICES.
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(FAKE), FAKE_NVML_DEVICES="3",
               CUDA_VISIBLE_DEVICES="0")
    child = subprocess.run([sys.executable, "-c", f"UUID = {uuid!r}\n" + _OPENS_BY_UUID],
                           env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["2 GPU-00000002-fa4e-4000-8000-000000000002",
                                         "0 GPU-00000000-fa4e-4000-8000-000000000000"]


def test_cuda_uuid_leaves_the_choice_to_cuda_visible_devices_where_torch_cannot_say(monkeypatch):
    torch = pytest.importorskip("torch")
    from perseus.sync import cuda_uuid

    def properties(uuid):
        return lambda device: type("P", (), {"uuid": uuid})()

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # asking would initialize it
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        properties("00000002-fa4e-4000-8000-000000000002"))
    assert cuda_uuid(0) is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert cuda_uuid(0) == "GPU-00000002-fa4e-4000-8000-000000000002"
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties("0000-0002"))
    assert cuda_uuid(0) is None  # a form not known here
    mig = "MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21"
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties(mig))
    assert cuda_uuid(0) == mig  # kept, for the NVML backend to refuse by name

    def no_such_device(device):
        raise AssertionError("Invalid device id")
    monkeypatch.setattr(torch.cuda, "get_device_properties", no_such_device)
    assert cuda_uuid(3) is None


HUNG_DRIVER_RUN = os.path.join(os.path.dirname(__file__), "workers", "hung_driver_run.py")


@needs_fake
@pytest.mark.parametrize("torch_first", [False, True], ids=["without-torch", "with-torch"])
def test_a_driver_that_stops_answering_lets_the_process_end(tmp_path, torch_first):
    """NVML on a GPU that has fallen off the bus blocks its callers for good (the fake: while a
    file exists). A training process that uses the client goes on training (a hook that waited on
    the driver would never return: the run would time out), close() gives up on the driver after
    shutdown_bound with one warning, and the process ends with exit code 0, not a signal, with
    and without torch imported (bench/hung_driver_stress.sh runs it 200 times under load)."""
    if torch_first:
        pytest.importorskip("torch")
    hang = tmp_path / "hang"
    env = dict(os.environ, FAKE_NVML_HANG_FILE=str(hang))
    run = subprocess.run([sys.executable, HUNG_DRIVER_RUN, str(hang), FAKE]
                         + (["torch"] if torch_first else []),
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"exit code {run.returncode}\n{run.stdout}\n{run.stderr}"
    lines = run.stdout.splitlines()
    assert [line.split()[0] for line in lines if line.startswith(("training ", "close "))] == \
        ["training", "close"], run.stdout
    exits = [line for line in lines if "at exit, the GPU driver did not return from" in line]
    assert len(exits) == 1, run.stdout
    assert "within shutdown_bound_s = 0.5 s" in exits[0]


@needs_fake
def test_training_on_an_nvml_gpu_does_not_import_torch():
    """The instruction hooks of an NVML GPU synchronize CUDA through torch only where the process
    imported torch: an import from inside a step would cost it seconds and set environment
    variables (numpy's import does) while the client's threads call the driver. torch is
    importable here (Debian's python3-torch), or the check is moot."""
    pytest.importorskip("torch")
    code = ("import sys, perseus\n"
            "gpu = perseus.NvmlGpu(0, library=sys.argv[1])\n"
            "opt = perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu=gpu)\n"
            "with opt.step():\n"
            "    with opt.instruction('forward'):\n"
            "        pass\n"
            "opt.close()\n"
            "print('torch' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", code, FAKE], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


@needs_fake
def test_nvml_gpu_without_an_energy_counter_raises_no_energy_counter(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_NO_ENERGY_COUNTER", "1")
    gpu = perseus.NvmlGpu(0, library=FAKE)
    with pytest.raises(perseus.NoEnergyCounter, match="this GPU has no energy counter"):
        gpu.total_energy_j()
    assert gpu.power_usage_w() > 0  # the rest of the device still answers


FAILING_PAIR = '''
import os
import shutil
import pytest
import perseus

FAKE = os.environ["PERSEUS_FAKE_NVML"]


def test_fails_holding_a_gpu(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_DEVICES", "2")
    gpu = perseus.NvmlGpu(1, library=FAKE)
    assert gpu is None  # fails, with the GPU in the traceback's frame


def test_starts_a_fresh_session():
    with pytest.raises(perseus.PerseusError, match="NVML device 1"):
        perseus.NvmlGpu(1, library=FAKE)
'''


@needs_fake
def test_a_failed_test_does_not_leave_its_nvml_session_to_the_next(tmp_path):
    """This suite's conftest frees what a failed test's traceback holds before the next test: an
    NvmlGpu kept there would keep the fake's session (two devices) open for the next test. Run in
    a pytest of its own, with this suite's conftest."""
    shutil.copy(os.path.join(os.path.dirname(__file__), "conftest.py"), tmp_path)
    (tmp_path / "test_pair.py").write_text(FAILING_PAIR)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "test_pair.py")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120,
                         env=dict(os.environ, PERSEUS_FAKE_NVML=FAKE,
                                  PYTHONPATH=os.path.dirname(os.path.dirname(perseus.__file__))))
    assert "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "FAILED test_pair.py::test_fails_holding_a_gpu" in run.stdout, run.stdout
