"""perseus.PipelineFrequencyOptimizer without a server (simulated GPU, Python backends)."""

import threading
import time
import warnings

import pytest

import perseus
from conftest import train


def make(profile_path, server_url="", **kw):
    kw.setdefault("gpu", "sim")
    if kw["gpu"] == "sim":
        kw.setdefault("counter", "ideal")  # exact energies
    kw.setdefault("report_every", 1)  # every iteration's energy is attributed at its end
    kw.setdefault("profile", profile_path)
    kw.setdefault("retries", 0)
    kw.setdefault("request_timeout", 1.0)
    kw.setdefault("barrier_timeout", 5.0)
    return perseus.PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 1, 2, server_url, **kw)


class Recording(perseus.PipelineFrequencyOptimizer):
    """Records the hook calls the context managers make."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = []

    def on_instruction_begin(self, name, stage=None):
        self.calls.append(("begin", name))
        super().on_instruction_begin(name, stage)

    def on_instruction_end(self, name, stage=None):
        self.calls.append(("end", name))
        super().on_instruction_end(name, stage)

    def on_step_begin(self):
        self.calls.append(("step_begin",))
        super().on_step_begin()

    def on_step_end(self):
        self.calls.append(("step_end",))
        super().on_step_end()


def recording(profile, **kw):
    return Recording(0, 0, 0, 0, 0, 1, 2, 1, 2, None, gpu="sim", profile=profile,
                     counter="ideal", report_every=1, **kw)


def test_no_server_runs_at_default_clock(profile2, profile2_rows):
    logged = []
    with make(profile2, log=logged.append) as opt:
        assert opt.round == -1
        assert not opt.done
        assert opt.sim is not None
        fwd = profile2_rows[(0, "forward")]
        bwd = profile2_rows[(0, "backward")]
        train(opt, 3)
        its = opt.iterations
        assert len(its) == 3
        # Virtual time: an iteration is exactly F + B at the highest clock.
        t = fwd[max(fwd)][0] + bwd[max(bwd)][0]
        e = fwd[max(fwd)][1] + bwd[max(bwd)][1]
        for time_s, energy_j in its:
            assert time_s == pytest.approx(t, rel=1e-6)
            assert energy_j == pytest.approx(e, rel=1e-6)
        assert opt.sim.now() == pytest.approx(3 * t, rel=1e-6)


def test_a_gpu_that_runs_two_stages_takes_the_stage_with_each_instruction(profile2,
                                                                          profile2_rows):
    """An interleaved or V-shaped schedule: one GPU runs stages 0 and 1 of the profile."""
    logged = []
    with make(profile2, stage=[0, 1], log=logged.append) as opt:
        order = [("forward", 0), ("forward", 1), ("backward", 1), ("backward", 0)]
        for _ in range(2):
            with opt.step():
                for name, stage in order:
                    with opt.instruction(name, stage=stage):
                        pass
        top = [profile2_rows[key][max(profile2_rows[key])] for key in
               [(0, "forward"), (1, "forward"), (1, "backward"), (0, "backward")]]
        for time_s, energy_j in opt.iterations:
            assert time_s == pytest.approx(sum(t for t, _ in top), rel=1e-6)
            assert energy_j == pytest.approx(sum(e for _, e in top), rel=1e-6)
        assert sorted(opt.last_window["time_breakdown"]) == [
            "backward@0", "backward@1", "forward@0", "forward@1"]
        assert not logged
        with pytest.raises(ValueError, match="stage must be a pipeline stage index >= 0"):
            opt.on_instruction_begin("forward", -2)
        train(opt, 1)  # no stage: the simulated GPU cannot tell which one runs
        assert any("names no stage, but this GPU runs several" in m for m in logged)


def test_context_managers_call_begin_and_end(profile2):
    opt = recording(profile2)
    with opt.step():
        with opt.instruction("forward"):
            pass
        with opt.instruction("backward"):
            pass
    assert opt.calls == [("step_begin",), ("begin", "forward"), ("end", "forward"),
                         ("begin", "backward"), ("end", "backward"), ("step_end",)]
    opt.close()


def test_context_managers_end_on_exception(profile2, profile2_rows):
    opt = recording(profile2)
    fwd = profile2_rows[(0, "forward")]
    with pytest.raises(KeyError):
        with opt.step():
            with opt.instruction("forward"):
                raise KeyError("boom")
    assert opt.calls == [("step_begin",), ("begin", "forward"), ("end", "forward"),
                         ("step_end",)]
    # The instruction really ended: simulated time advanced by it, and training goes on.
    assert opt.sim.now() == pytest.approx(fwd[max(fwd)][0], rel=1e-6)
    with opt.step():
        with opt.instruction("forward"):
            pass
    assert len(opt.iterations) == 2
    opt.close()


def test_unreachable_server_degrades_with_warning(profile2, closed_port_url):
    logged = []
    opt = make(profile2, closed_port_url, log=logged.append)
    for _ in range(4):
        opt.on_step_begin()
        opt.on_instruction_begin("forward")
        opt.on_instruction_end("forward")
        opt.on_instruction_begin("backward")
        opt.on_instruction_end("backward")
        opt.on_step_end()
    assert opt.degraded
    assert opt.round == -1
    assert len(opt.iterations) == 4
    assert logged, "a warning must say why the optimizer runs at the default clock"
    assert all(isinstance(m, str) and m for m in logged)
    opt.close()


def test_unreachable_server_default_log_is_a_python_warning(profile2, closed_port_url):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = make(profile2, closed_port_url, report_every=1)
        with opt.step():
            with opt.instruction("forward"):
                pass
        assert opt.degraded
        opt.close()
    ours = [w for w in caught if issubclass(w.category, perseus.PerseusWarning)]
    assert ours, [str(w.message) for w in caught]
    # Each names the user's line (this file), not the package's internals nor contextlib.
    assert {w.filename for w in ours} == {__file__}, [(w.filename, w.lineno) for w in ours]


def test_strict_raises(profile2, closed_port_url):
    with pytest.raises(perseus.PerseusError):
        opt = make(profile2, closed_port_url, strict=True)
        # A client may defer its first request; then the first hook must raise.
        with opt.step():
            with opt.instruction("forward"):
                pass


def test_the_adapters_plain_hooks_measure_as_the_methods_do(profile2, profile2_rows):
    """The hooks the framework adapters call (no pybind11 dispatch): the same measurements as
    on_instruction_begin / _end, the same errors, and alive as long as they are held."""
    with make(profile2, stage=[0, 1]) as by_methods, make(profile2, stage=[0, 1]) as by_hooks:
        begin, end = by_hooks._instruction_hooks()
        order = [("forward", 0), ("forward", 1), ("backward", 1), ("backward", 0)]
        for _ in range(2):
            for opt, b, e in ((by_methods, by_methods.on_instruction_begin,
                               by_methods.on_instruction_end), (by_hooks, begin, end)):
                opt.on_step_begin()
                for name, stage in order:
                    b(name, stage)
                    e(name, stage)
                opt.on_step_end()
        assert by_hooks.iterations == by_methods.iterations
        assert len(by_hooks.iterations) == 2
        assert [r[0] for r in by_hooks.sim.runs()] == ["forward@0", "forward@1", "backward@1",
                                                       "backward@0"] * 2
        with pytest.raises(ValueError, match="stage must be a pipeline stage index >= 0"):
            begin("forward", -2)
        with pytest.raises(TypeError, match=r"takes \(kind, stage\)"):
            begin("forward")
        with pytest.raises(TypeError):
            begin(3, 0)
    del by_hooks  # the hooks keep the client's object alive; closed, they say so
    with pytest.raises(perseus.PerseusError, match="closed"):
        end("forward", 0)


def test_closed_optimizer_raises(profile2):
    opt = make(profile2)
    opt.close()
    opt.close()  # idempotent
    with pytest.raises(perseus.PerseusError):
        opt.on_step_begin()


class PyBackend:
    """A GPU backend written in Python (duck-typed GpuBackend)."""

    def __init__(self):
        self.t = 0.0
        self.energy = 0.0
        self.readers = set()  # threads that read the energy counter
        self.calls = []
        self.lock = threading.Lock()

    def supported_clocks(self):
        return [1500, 1200, 900]

    def lock_clock(self, mhz):
        with self.lock:
            self.calls.append(("lock_clock", mhz))

    def reset_clock(self):
        with self.lock:
            self.calls.append(("reset_clock",))

    def set_power_limit(self, watts):
        with self.lock:
            self.calls.append(("set_power_limit", watts))

    def reset_power_limit(self):
        with self.lock:
            self.calls.append(("reset_power_limit",))

    def now_s(self):
        return self.t

    def total_energy_j(self):
        self.readers.add(threading.get_ident())
        return self.energy

    def instruction_begin(self, name):
        with self.lock:
            self.calls.append(("instruction_begin", name))

    def instruction_end(self, name):
        with self.lock:
            self.calls.append(("instruction_end", name))
        self.t += 0.25
        self.energy += 50.0

    synchronous_clocks = True


def test_python_backend_object(profile2):
    gpu = PyBackend()
    opt = make(profile2, gpu=gpu, profile=None)
    train(opt, 2)
    # Times are exact; the counter is read by the sampler thread only, never by the hooks.
    assert [t for t, _ in opt.iterations] == [pytest.approx(0.5)] * 2
    deadline = time.monotonic() + 10.0
    while not gpu.readers and time.monotonic() < deadline:
        time.sleep(0.01)  # the sampler thread needs the GIL to read a Python backend
    assert gpu.readers and threading.get_ident() not in gpu.readers
    names = [c for c in gpu.calls if c[0].startswith("instruction")]
    assert names == [("instruction_begin", "forward"), ("instruction_end", "forward"),
                     ("instruction_begin", "backward"), ("instruction_end", "backward")] * 2
    opt.close()


class CounterlessBackend(PyBackend):
    """A Python backend on a GPU without an energy counter (pynvml answers Not Supported before
    Volta): it says so with perseus.NoEnergyCounter."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def total_energy_j(self):
        self.reads += 1
        raise perseus.NoEnergyCounter("pynvml: Not Supported")


def test_python_backend_without_an_energy_counter_is_said_once(profile2):
    """The client says it once, naming the backend's reason, and reads the counter no more; a
    plain exception from the same backend would be retried as a failed read."""
    assert issubclass(perseus.NoEnergyCounter, perseus.PerseusError)
    gpu = CounterlessBackend()
    said = []
    opt = make(profile2, gpu=gpu, profile=None, log=said.append)
    deadline = time.monotonic() + 10.0
    while not said and time.monotonic() < deadline:
        time.sleep(0.01)  # the sampler thread's first read
    train(opt, 4)
    opt.close()
    assert said == ["gpu backend total_energy_j: pynvml: Not Supported: Perseus measures no energy "
                    "on it, and every reporting window is reported unmeasured (the clocks a "
                    "schedule plans are still set)"], said
    assert gpu.reads == 1


def test_sim_gpu_object_is_shared(profile2):
    gpu = perseus.SimGpu(profile2, stage=1, blocking_power=80.0, counter="ideal")
    opt = make(profile2, gpu=gpu, profile=None)
    assert opt.sim is gpu
    with opt.step():
        with opt.instruction("forward"):
            pass
    assert gpu.now() > 0 and gpu.true_energy() > 0
    assert opt.iterations[0][0] == pytest.approx(gpu.now(), rel=1e-6)
    opt.close()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"gpu": "tpu"}, ValueError, "gpu must be one of"),
    ({"gpu": None}, ValueError, "gpu"),
    ({"gpu": "sim", "profile": None}, ValueError, "profile"),
    ({"scheduler_args": "microbatches=4"}, TypeError, "scheduler_args"),
    ({"scheduler_args": {"bad": object()}}, perseus.PerseusError, "scheduler_args"),
    ({"log": "stderr"}, TypeError, "log"),
    ({"job_metadata": {"a": 1}}, TypeError, "job_metadata"),
    ({"stage": 7}, perseus.PerseusError, ""),
    ({"gpu": object(), "profile": None}, perseus.PerseusError, "gpu backend"),
])
def test_bad_arguments(profile2, kwargs, error, match):
    with pytest.raises(error, match=match):
        make(profile2, **kwargs)


def test_missing_profile_file(tmp_path):
    with pytest.raises(perseus.PerseusError, match="missing.csv"):
        make(str(tmp_path / "missing.csv"))


def test_invalid_options_raise(profile2):
    # Rank outside the world: invalid options are errors even when not strict.
    with pytest.raises(perseus.PerseusError):
        perseus.PipelineFrequencyOptimizer(5, 0, 0, 0, 0, 1, 2, 1, 2, None, gpu="sim",
                                           profile=profile2)


def test_hooks_out_of_order_warn_and_the_next_iterations_are_measured(profile2, profile2_rows):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = make(profile2)
        opt.on_instruction_begin("forward")  # outside an iteration
        opt.on_instruction_end("forward")
        opt.on_step_begin()
        opt.on_step_begin()  # the first never ends
        opt.on_step_end()
        train(opt, 1)
        measured = list(opt.iterations)
        opt.close()
    messages = [str(w.message) for w in caught if issubclass(w.category, perseus.PerseusWarning)]
    assert any("on_instruction_begin('forward') outside an iteration" in m for m in messages), \
        messages
    assert any("on_step_begin while an iteration is running" in m for m in messages), messages
    assert len(measured) == 2  # the one that ended, and the good one
    top = max(profile2_rows[(0, "forward")])
    time_s = sum(profile2_rows[(0, name)][top][0] for name in ("forward", "backward"))
    energy_j = sum(profile2_rows[(0, name)][top][1] for name in ("forward", "backward"))
    assert measured[1] == pytest.approx((time_s, energy_j), rel=1e-9)
