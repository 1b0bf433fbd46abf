"""Shared fixtures: the perseus binary (PERSEUS_BIN), synthetic profiles, a closed port; and a
clean start for each test after a failed one (pytest_runtest_setup)."""

import csv
import gc
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Frees what the last failed test's traceback holds before the next test sets up (pytest
    keeps it in sys.last_traceback for post-mortem debugging until the next test's body runs): a
    GPU backend kept alive there keeps its NVML session open, and the next test would share that
    session, with the failed test's fake configuration, and fail for a reason not its own."""
    if getattr(sys, "last_traceback", None) is None:
        return
    for name in ("last_type", "last_value", "last_traceback"):
        setattr(sys, name, None)
    gc.collect()


def _perseus_bin():
    path = os.environ.get("PERSEUS_BIN") or shutil.which("perseus")
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    return None


@pytest.fixture(scope="session")
def perseus_bin():
    path = _perseus_bin()
    if path is None:
        pytest.skip("no perseus binary: set PERSEUS_BIN")
    return path


def synth_profile(perseus_bin, stages, out):
    subprocess.run([perseus_bin, "profile", "synth", "--gpu", "a100", "--stages", str(stages),
                    "--out", str(out)], check=True, capture_output=True, text=True)
    return str(out)


@pytest.fixture(scope="session")
def profile2(perseus_bin, tmp_path_factory):
    """A 2-stage A100 profile CSV (`perseus profile synth --gpu a100 --stages 2`)."""
    return synth_profile(perseus_bin, 2, tmp_path_factory.mktemp("profile") / "a100x2.csv")


def read_rows(path):
    """{(stage, instruction): {mhz: (time_s, energy_j)}} from a profile CSV."""
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (int(r["stage"]), r["instruction"])
            rows.setdefault(key, {})[int(r["frequency"])] = (float(r["time"]), float(r["energy"]))
    return rows


@pytest.fixture(scope="session")
def profile2_rows(profile2):
    return read_rows(profile2)


@pytest.fixture
def closed_port_url():
    """http://127.0.0.1:P where nothing listens on P."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class MeasuringOnly:
    """A GPU backend's settings, all doing nothing: the base of test backends that only measure
    (they add supported_clocks, now_s and total_energy_j)."""

    def lock_clock(self, mhz):
        pass

    def reset_clock(self):
        pass

    def set_power_limit(self, watts):
        pass

    def reset_power_limit(self):
        pass


def train(opt, iterations, names=("forward", "backward"), seconds=None):
    """Runs `iterations` training steps through the hooks, one instruction per name, each
    lasting seconds[name] when given (else no time at all)."""
    for _ in range(iterations):
        with opt.step():
            for name in names:
                with opt.instruction(name):
                    if seconds:
                        time.sleep(seconds[name])


def other_thread_resumes_during(call):
    """Runs call() on a second thread while this one sleeps 20 ms; returns (when this thread ran
    again, when call returned), in seconds from the start. A call that holds the GIL keeps this
    thread from waking up until it returns."""
    started = threading.Event()
    thread = threading.Thread(target=lambda: (started.set(), call()))
    t0 = time.monotonic()
    thread.start()
    started.wait()
    time.sleep(0.02)
    resumed = time.monotonic() - t0
    thread.join()
    return resumed, time.monotonic() - t0
