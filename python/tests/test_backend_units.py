"""A GPU backend written in Python with the mistakes people make: a counter in millijoules (as
pynvml returns it), a clock in milliseconds, a counter that starts again. The client says so once,
early, and training goes on (strict mode raises)."""

import threading
import time
import warnings

import pytest

import perseus
from conftest import MeasuringOnly, train

POWER_W = 200.0  # what the backend's GPU draws, always
INSTRUCTION_S = 0.25


class CountingBackend(MeasuringOnly):
    """A GPU drawing POWER_W whose clock moves INSTRUCTION_S per instruction. Its counter and clock
    are reported in `energy_unit` joules and `time_unit` seconds; from instruction `reset_at` on
    (None: never) its counter starts again from 0; while instructions in `failing` (a range) run,
    a counter read raises."""

    def __init__(self, energy_unit=1.0, time_unit=1.0, reset_at=None, failing=range(0)):
        self.energy_unit, self.time_unit, self.reset_at = energy_unit, time_unit, reset_at
        self.failing = failing
        self.t = 0.0
        self.offset_j = 0.0
        self.instructions = 0
        self.lock = threading.Lock()

    def supported_clocks(self):
        return [1500, 1200]

    def now_s(self):
        with self.lock:
            return self.t / self.time_unit

    def total_energy_j(self):
        with self.lock:
            if self.instructions in self.failing:
                raise RuntimeError("NVML_ERROR_TIMEOUT")
            return (POWER_W * self.t - self.offset_j) / self.energy_unit

    def instruction_end(self, name):
        with self.lock:
            self.t += INSTRUCTION_S
            self.instructions += 1
            if self.instructions == self.reset_at:
                self.offset_j = POWER_W * self.t
        time.sleep(0.01)  # the sampler thread reads the counter meanwhile

    synchronous_clocks = True


def run(gpu, iterations=6, **kw):
    """Trains `iterations` iterations (0.5 s of the backend's time each); returns the optimizer's
    iterations and the warning messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, gpu=gpu,
                                                 report_every=1, sampler_period=0.001, **kw)
        try:
            train(opt, iterations)
            measured = list(opt.iterations)
        finally:
            opt.close()
    return measured, [str(w.message) for w in caught
                      if issubclass(w.category, perseus.PerseusWarning)]


def said(messages, text):
    return [m for m in messages if text in m]


def mean_power(iterations):
    """Energy over time of the iterations whose window saw the counter change."""
    resolved = [(t, e) for t, e in iterations if e > 0]
    return sum(e for _, e in resolved) / sum(t for t, _ in resolved) if resolved else 0.0


def test_a_backend_in_joules_and_seconds_is_not_questioned():
    measured, messages = run(CountingBackend())
    assert not said(messages, "energy counter over the first measured iterations"), messages
    assert mean_power(measured) == pytest.approx(POWER_W, rel=0.1), measured


@pytest.mark.parametrize("units, mistake", [
    ({"energy_unit": 1e-3}, "energy in millijoules"),
    ({"time_unit": 1e-3}, "time in milliseconds"),
])
def test_a_unit_mistake_is_said_once_and_training_goes_on(units, mistake):
    measured, messages = run(CountingBackend(**units))
    found = said(messages, "energy counter over the first measured iterations")
    assert len(found) == 1, messages
    assert mistake in found[0] and "total_energy_j() must return joules" in found[0], found[0]
    assert len(measured) == 6  # every iteration was still measured


def test_strict_mode_raises_on_a_unit_mistake():
    with pytest.raises(perseus.PerseusError, match="energy in millijoules"):
        run(CountingBackend(energy_unit=1e-3), strict=True)


def test_a_counter_that_starts_again_is_said_once_and_measured_after():
    measured, messages = run(CountingBackend(reset_at=5), iterations=8)
    found = said(messages, "energy counter went down")
    assert len(found) == 1, messages
    assert "a GPU reset, or a backend whose total_energy_j() is no running total" in found[0]
    # No iteration comes out negative, and those well after the reset measure the power again.
    assert all(e >= 0.0 for _, e in measured), measured
    assert mean_power(measured[5:]) == pytest.approx(POWER_W, rel=0.25), measured


def test_counter_reads_that_fail_for_a_while_are_retried_and_measure_again():
    """Reads fail while instructions 6-9 run (a transient driver error): said once, retried, said
    again when they work; the energy spent meanwhile comes with the first change after the gap,
    so every iteration still measures the backend's power."""
    measured, messages = run(CountingBackend(failing=range(6, 10)), iterations=12)
    failed = said(messages, "energy counter read failed: ")
    assert len(failed) == 1 and "NVML_ERROR_TIMEOUT" in failed[0], messages
    assert len(said(messages, "energy counter reads work again after failing")) == 1, messages
    assert len(measured) == 12
    assert mean_power(measured) == pytest.approx(POWER_W, rel=0.1), measured
    assert mean_power(measured[6:]) == pytest.approx(POWER_W, rel=0.1), measured
