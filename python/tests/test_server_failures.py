"""Against a real `perseus serve`: a GPU whose energy counter stops, or that falls off the bus,
mid-sweep fails the profiler's job naming the rank, and never the training."""

import os
import time

import pytest

import perseus
from conftest import MeasuringOnly, train
from server_support import get_json, schedule_answers
from server_support import server  # noqa: F401  (a fixture)

FAKE = os.environ.get("PERSEUS_FAKE_NVML", "")


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
    """A profiler job on `gpu` (one window of 4 iterations per clock, min_window 0, output
    `out`'s name, in the job's folder of the server's --output-dir, `out`'s folder)
    through 80 iterations of a 10 ms forward and a 20 ms backward. Checks that the job failed on
    the counter naming rank 0, wrote no profile of 0 J rows, and was said to have failed once,
    the client never asking again; that every iteration trained (and measured its time); and
    returns (the job's status, the client's log)."""
    args = {"microbatches": 1, "output": out.name, "skip_iterations": 0, "max_windows": 1,
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
    assert not (out.parent / job_id / out.name).exists()  # the job's folder in --output-dir
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
