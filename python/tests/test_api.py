"""Import and API surface of the `perseus` package."""

import inspect
import subprocess
import sys

import pytest

import perseus


def test_exports():
    for name in ["PipelineFrequencyOptimizer", "PerseusError", "PerseusWarning", "SimGpu",
                 "NvmlGpu", "sync_device"]:
        assert hasattr(perseus, name), name
    assert issubclass(perseus.PerseusError, RuntimeError)
    assert issubclass(perseus.PerseusWarning, Warning)
    assert perseus.__version__


def test_zeus_positional_order():
    params = list(inspect.signature(perseus.PipelineFrequencyOptimizer).parameters.values())
    positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional == ["rank", "dp_rank", "pp_rank", "tp_rank", "device_id", "dp_degree",
                          "pp_degree", "tp_degree", "world_size", "server_url", "job_metadata"]
    keyword = {p.name: p.default for p in params if p.kind == p.KEYWORD_ONLY}
    for name, default in {"gpu": "nvml", "profile": None, "stage": None, "blocking_power": None,
                          "real_time": False, "time_scale": 1.0, "job_id": None,
                          "scheduler": None, "scheduler_args": None, "report_every": 5,
                          "strict": False, "request_timeout": 5.0, "barrier_timeout": 10.0,
                          "retries": 3, "log": None}.items():
        assert keyword[name] == default, name


def test_methods_and_properties():
    cls = perseus.PipelineFrequencyOptimizer
    for name in ["on_step_begin", "on_step_end", "on_instruction_begin", "on_instruction_end",
                 "instruction", "step", "close"]:
        assert callable(getattr(cls, name)), name
    for name in ["job_id", "round", "done", "degraded", "iterations"]:
        assert isinstance(getattr(cls, name), property), name
    for name in ["wait_until", "now", "total_energy", "supported_clocks", "lock_clock"]:
        assert callable(getattr(perseus.SimGpu, name)), name


def test_sync_device_is_a_noop_without_cuda():
    perseus.sync_device()
    perseus.sync_device(0)


def test_package_works_without_torch():
    # torch made unimportable: the package still imports, sync_device is a no-op, and torch is
    # never imported behind the user's back.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import perseus\n"
        "perseus.sync_device()\n"
        "assert sys.modules['torch'] is None\n"
        "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_import_does_not_import_torch():
    code = "import sys, perseus; print('torch' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


def test_version_matches_the_command(perseus_bin):
    out = subprocess.run([perseus_bin, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"perseus {perseus.__version__}"
    assert perseus.__version__.count(".") == 2
