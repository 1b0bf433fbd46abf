"""``PipelineFrequencyOptimizer``: the Python face of the Perseus training-side client.

Same positional arguments as Zeus's ``PipelineFrequencyOptimizer``, so it drops into training
code written for Zeus. The work (registration, schedules, the clock thread, measurement and
reporting) happens in the C++ client library; this module picks the GPU backend, shares the job
id across torch.distributed ranks, routes warnings to Python and adds context managers.

Failure policy (docs/architecture.md, section 7): when the server is unreachable or answers
garbage, training continues at the default clock, a :class:`PerseusWarning` says why and
``degraded`` is True.
With ``strict=True`` such failures raise :class:`perseus.PerseusError` instead.
"""

import contextlib
import json
import os
import sys
import warnings

from perseus import _perseus
from perseus.sync import cuda_uuid, sync_device

__all__ = ["PerseusWarning", "PipelineFrequencyOptimizer"]

_GPU_KINDS = ("nvml", "sim")


class PerseusWarning(RuntimeWarning):
    """The optimizer fell back to the default clock (or hit another non-fatal problem)."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_stacklevel():
    """The ``stacklevel`` for ``warnings.warn`` called by our caller that names the first frame
    outside this package and contextlib (the user's line, not ours); 1 when our caller has no
    caller in Python (a thread of the client library, e.g. the energy sampler, reports)."""
    try:
        frame, level = sys._getframe(2), 2
    except ValueError:
        return 1
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE_DIR) or
                                 frame.f_code.co_filename == contextlib.__file__):
        frame, level = frame.f_back, level + 1
    return level


def _stages(stage):
    """A simulated GPU's stage: an index, or a list of indices."""
    if isinstance(stage, (list, tuple)):
        return [int(s) for s in stage]
    return int(stage)


def _order_as_json(order):
    """A pipeline order (torch's ``schedule.pipeline_order``: rank -> actions, or a list of
    per-rank lists) with every action as its text and None for idle."""
    def texts(actions):
        return [None if a is None else str(a) for a in actions]
    if isinstance(order, dict):
        return {str(rank): texts(actions) for rank, actions in order.items()}
    if isinstance(order, (list, tuple)):
        return [texts(actions) for actions in order]
    raise TypeError("pipeline_order must be per-rank action lists (a list, or a dict keyed by "
                    f"rank), not {type(order).__name__}")


def _default_log(message):
    warnings.warn(message, PerseusWarning, stacklevel=_user_stacklevel())


def _torch_distributed():
    """torch.distributed when torch is already imported and a process group is initialized."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _broadcast_job_id(job_id):
    """Every rank calls this; returns rank 0's job id (torch.distributed.broadcast_object_list)."""
    dist = _torch_distributed()
    if dist is None:
        return job_id
    box = [job_id]
    dist.broadcast_object_list(box, src=0)
    return str(box[0] or "")


class PipelineFrequencyOptimizer:
    """Sets the GPU clock per pipeline instruction following plans from the Perseus server.

    Args (positional, as in Zeus): rank, dp_rank, pp_rank, tp_rank, device_id, dp_degree,
    pp_degree, tp_degree, world_size, server_url (``None`` or ``""``: no server, default
    clock), job_metadata.

    Keyword-only:
        gpu: ``"nvml"`` (the CUDA device ``device_id`` through NVML: the device of the UUID
            torch reports for it where CUDA is initialized, else as CUDA_VISIBLE_DEVICES maps
            it), ``"sim"`` (a simulated
            GPU following ``profile``), a :class:`perseus.SimGpu` / :class:`perseus.NvmlGpu`, or
            any object with the GpuBackend methods (supported_clocks, lock_clock, reset_clock,
            set_power_limit, reset_power_limit, now_s: monotonic seconds, total_energy_j: a
            running total in joules; pynvml's counter is in millijoules, and a power no GPU
            draws is warned of once; on a GPU without an energy counter it raises
            :class:`perseus.NoEnergyCounter`, which the client says once and stops reading).
        profile: profile CSV for ``gpu="sim"`` (required there).
        stage: profile stage the simulated GPU runs (default: ``pp_rank``), or a list of them
            for a GPU that runs several (interleaved and V-shaped schedules).
        blocking_power: simulated GPU's power while blocked, in watts (default 0).
        real_time, time_scale: simulated GPU in real time, ``time_scale`` wall seconds per
            simulated second (default: virtual time).
        counter: the simulated GPU's energy counter, ``"realistic"`` (refreshed every 100 ms,
            4 ms per read, as measured on an H100; the default) or ``"ideal"`` (exact reads);
            counter_options: a dict overriding refresh_period_s, refresh_jitter_s,
            read_latency_s, sampled_fraction (0.25 models the partial sampling Yang et al.
            report for A100/H100 power readings; recorded H100 energy-counter windows fit 1,
            the default), lag_s (0.010: a refresh trails the energy it reports, as on an H100),
            window_s (0.020: and averages it over this long, as on an H100), time_constant_s
            (0: a first-order response instead of the window, which must then be 0; bursts on
            H100s measured 0.011-0.012), noise, seed.
        observe: observe-only mode: measure and report, never lock a clock or set a power
            limit (nor reset them).
        attribution: how counter energy is attributed to instructions: ``"busy-overlap"``
            (default), ``"fit"`` (least squares per instruction), ``"overlap"`` or ``"deltas"``
            (docs/measuring-energy.md).
        sampler_period: minimum seconds between two energy-counter reads (0: back to back).
        job_id: join this job instead of registering one. When None and torch.distributed is
            initialized, rank 0's id is broadcast to every rank.
        scheduler, scheduler_args: per-job scheduler name and its arguments (a dict).
        pipeline_order: the order every pipeline rank runs, per-rank lists of actions in
            PyTorch's notation (``"0F3"``, ``"1I0"``, None for idle), sent with the job's
            registration so that the server plans for it (docs/protocol.md); the framework
            adapters (:func:`perseus.torch.attach`) read it from the framework.
        report_every: iterations per reporting window (a schedule may ask for more: the
            profiler does when windows are too short for the energy counter).
        strict: raise :class:`perseus.PerseusError` on server trouble instead of degrading.
        request_timeout, barrier_timeout: seconds per HTTP request / for the schedule barrier.
        retries: retries per request after the first attempt.
        stall_bound: the most seconds one reporting window may block training on the server
            (every request, retry and barrier wait together), whatever the server does.
        shutdown_bound: the most seconds :meth:`close` may block on the GPU driver (restoring
            the default clock and power limit, stopping the sampler and clock threads); a driver
            that does not answer by then (a GPU fallen off the bus) is left behind with one
            warning, so that the process can end.
        token: the server's cluster token (default: the PERSEUS_TOKEN environment variable).
        ca_file: for an ``https://`` server_url, the CA certificate (PEM) its certificate must
            chain to (default: PERSEUS_CA_FILE, else the system's trusted certificates).
        max_skipped_windows: after a failed exchange the client skips 1, 2, 4, ... windows
            before it contacts the server again, at most this many.
        log: callable taking one warning line (default: ``warnings.warn`` with
            :class:`PerseusWarning`).
        share_job_id: callable run by every rank with its job id (rank 0: the registered id,
            others: "") that returns rank 0's id; for frameworks other than torch.distributed
            (default: torch.distributed.broadcast_object_list when initialized).
    """

    def __init__(self, rank, dp_rank, pp_rank, tp_rank, device_id, dp_degree, pp_degree,
                 tp_degree, world_size, server_url, job_metadata=None, *, gpu="nvml",
                 profile=None, stage=None, blocking_power=None, real_time=False,
                 time_scale=1.0, job_id=None, scheduler=None, scheduler_args=None,
                 report_every=5, strict=False, request_timeout=5.0, barrier_timeout=10.0,
                 retries=3, log=None, share_job_id=None, counter="realistic",
                 counter_options=None, observe=False, attribution="busy-overlap",
                 sampler_period=0.0, stall_bound=10.0, max_skipped_windows=32, token=None,
                 ca_file=None, shutdown_bound=5.0, pipeline_order=None):
        self._opt = None
        self.device_id = device_id
        self._sync = False
        self.sim = None  # the SimGpu when the backend is simulated
        backend = self._make_backend(gpu, device_id, pp_rank, profile, stage, blocking_power,
                                     real_time, time_scale, counter, counter_options)
        self.gpu = backend  # the GPU backend in use (e.g. the NvmlGpu: its uuid(), nvml_index())
        if scheduler_args is not None and not isinstance(scheduler_args, dict):
            raise TypeError(f"scheduler_args must be a dict, not {type(scheduler_args).__name__}")
        if job_metadata is not None and not isinstance(job_metadata, str):
            raise TypeError(f"job_metadata must be a str, not {type(job_metadata).__name__}")
        if log is not None and not callable(log):
            raise TypeError("log must be callable (it receives one warning line)")
        if share_job_id is not None and not callable(share_job_id):
            raise TypeError("share_job_id must be callable")
        share = share_job_id
        if share is None and job_id is None and _torch_distributed() is not None:
            share = _broadcast_job_id
        options = _perseus._OptimizerOptions()
        fields = dict(
            rank=int(rank), dp_rank=int(dp_rank), pp_rank=int(pp_rank), tp_rank=int(tp_rank),
            dp_degree=int(dp_degree), pp_degree=int(pp_degree), tp_degree=int(tp_degree),
            world_size=int(world_size), server_url=str(server_url or ""),
            job_metadata=job_metadata, job_id=str(job_id or ""), scheduler=str(scheduler or ""),
            report_every=int(report_every), strict=bool(strict),
            request_timeout_s=float(request_timeout), barrier_timeout_s=float(barrier_timeout),
            retries=int(retries), log=log if log is not None else _default_log,
            share_job_id=share, observe=bool(observe), attribution=str(attribution),
            sampler_period_s=float(sampler_period), stall_bound_s=float(stall_bound),
            shutdown_bound_s=float(shutdown_bound), max_skipped_windows=int(max_skipped_windows),
            token=str(token or ""), ca_file=str(ca_file or ""))
        if scheduler_args is not None:
            fields["scheduler_args"] = scheduler_args
        if pipeline_order is not None:
            fields["pipeline_order"] = _order_as_json(pipeline_order)
        for name, value in fields.items():
            setattr(options, name, value)
        self._opt = _perseus._Optimizer(backend, options)

    def _make_backend(self, gpu, device_id, pp_rank, profile, stage, blocking_power,
                      real_time, time_scale, counter, counter_options):
        if isinstance(gpu, str):
            if gpu not in _GPU_KINDS:
                raise ValueError(f"gpu must be one of {', '.join(map(repr, _GPU_KINDS))} or a "
                                 f"backend object, not {gpu!r}")
            if gpu == "sim":
                if profile is None:
                    raise ValueError('gpu="sim" needs profile= (a profile CSV path, e.g. from '
                                     '`perseus profile synth --gpu a100 --stages S --out F`)')
                self.sim = _perseus.SimGpu(
                    os.fspath(profile),
                    stage=_stages(pp_rank if stage is None else stage),
                    blocking_power=float(0.0 if blocking_power is None else blocking_power),
                    real_time=bool(real_time),
                    time_scale=float(time_scale),
                    counter=str(counter),
                    counter_options=dict(counter_options or {}))
                return self.sim
            self._sync = True
            try:
                return _perseus.NvmlGpu(int(device_id), cuda_uuid=cuda_uuid(device_id) or "")
            except _perseus.PerseusError as e:
                if "cannot load NVML" not in str(e):
                    raise
                raise _perseus.PerseusError(
                    f'{e}; gpu="nvml" needs an NVIDIA driver. Without one, run against a '
                    'simulated GPU: gpu="sim", profile="profile.csv" (e.g. from `perseus '
                    'profile synth --gpu a100 --stages S --out profile.csv`)') from None
        if gpu is None:
            raise ValueError('gpu must be "nvml", "sim" or a backend object, not None')
        if isinstance(gpu, _perseus.NvmlGpu):
            self._sync = True
        if isinstance(gpu, _perseus.SimGpu):
            self.sim = gpu
        return gpu

    # Hooks -----------------------------------------------------------------------------------

    def on_step_begin(self):
        """Marks the start of a training iteration."""
        self._opt.on_step_begin()

    def on_step_end(self):
        """Marks the end of a training iteration (reports every ``report_every`` iterations)."""
        self._opt.on_step_end()

    def on_instruction_begin(self, name, stage=None):
        """Applies the clock planned for the next ``name`` instruction ("forward", "backward",
        "backward_input", "backward_weight") of pipeline stage ``stage``. The stage is needed
        on a GPU that runs several stages (interleaved and V-shaped schedules); with one stage
        per GPU it may be left out."""
        if self._sync:
            sync_device(self.device_id)
        self._opt.on_instruction_begin(name, stage)

    def on_instruction_end(self, name, stage=None):
        """Marks the end of the ``name`` instruction (of ``stage``) and records its time and
        energy."""
        if self._sync:
            sync_device(self.device_id)
        self._opt.on_instruction_end(name, stage)

    def _instruction_hooks(self):
        """(begin, end): on_instruction_begin and _end for the adapters, as the client's plain
        callables where the device needs no synchronisation (no Python frame and no pybind11
        dispatch per hook: most of a hook's cost in a training step, where the caches are cold)."""
        if self._sync:
            return self.on_instruction_begin, self.on_instruction_end
        return self._opt._instruction_hooks()

    @contextlib.contextmanager
    def instruction(self, name, stage=None):
        """``with opt.instruction("forward", stage=2): ...``; the end hook also runs on
        exceptions."""
        self.on_instruction_begin(name, stage)
        try:
            yield self
        finally:
            self.on_instruction_end(name, stage)

    @contextlib.contextmanager
    def step(self):
        """``with opt.step(): ...``: one training iteration (end hook also runs on exceptions)."""
        self.on_step_begin()
        try:
            yield self
        finally:
            self.on_step_end()

    # State -----------------------------------------------------------------------------------

    @property
    def job_id(self):
        """The job id ("" when running without a server)."""
        return self._opt.job_id

    @property
    def mismatched_iterations(self):
        """Iterations so far that did not follow their schedule (other instructions, order or
        count) and so ran at the default clock; each such window logs one warning saying what
        differs, and ``degraded`` is True meanwhile."""
        return self._opt.mismatched_iterations

    @property
    def job_credential(self):
        """``"<job id>#<secret>"`` when the server gave the job a secret (a server with a
        cluster token), else the job id: what other ranks pass as ``job_id`` or
        ``PERSEUS_JOB_ID`` to join the job."""
        return self._opt.job_credential

    @property
    def round(self):
        """The schedule round in use (-1 while running at the default clock)."""
        return self._opt.round

    @property
    def job_failed(self):
        """True once the server said this job failed for good (its scheduler failed; the warning
        says why): the client runs at the default clock and asks no more."""
        return self._opt.job_failed

    @property
    def planned_clocks(self):
        """One iteration's ``(instruction, MHz)`` in the round in use, in execution order (what
        the next iteration runs unless it leaves the schedule); empty at the default clock."""
        return self._opt.planned_clocks

    @property
    def done(self):
        """True once the server sent its final schedule."""
        return self._opt.done

    @property
    def degraded(self):
        """True while running at the default clock: the server failed us, or the training loop
        left its schedule (see ``mismatched_iterations``)."""
        return self._opt.degraded

    @property
    def iterations(self):
        """(time_s, energy_j) of every iteration whose reporting window closed, in order.

        Energy is attributed from the GPU's energy counter when a window of ``report_every``
        iterations closes, so the latest iterations appear once their window is complete. A
        window in which the counter did not change (``last_window["measured"]`` False) has
        energies that are unknown: 0, or extrapolated from earlier windows."""
        return self._opt.iterations

    @property
    def last_window(self):
        """The last closed reporting window's measurements, as a dict: ``iter_time``,
        ``iter_energy``, ``time_breakdown`` / ``energy_breakdown`` (instruction -> iteration ->
        occurrences), ``energy_stderr`` (instruction -> standard error in J of the mean energy
        of one occurrence), ``energy_pooling_error`` (instruction -> how far in J that mean may
        be from its own where busy-overlap pooled its power with other instructions', which
        more windows do not shrink; 0 for one with a power of its own), ``attribution`` (method
        used), ``measured`` (the counter changed during the window; False: its energies are
        unknown, 0 or extrapolated from earlier windows, and the server is told so) and ``clocks`` (instruction -> ``samples``, ``mean_mhz``, ``held_down_share``,
        ``locked_mhz``: the SM clock it ran at, read beside each counter read; empty where the
        backend reports no clock, e.g. the simulated GPU). Available without a server; empty
        lists before the first window closes."""
        return self._opt.last_window

    @property
    def last_window_trace(self):
        """What the last closed reporting window attributed, as a dict that
        ``perseus.attribute(trace, method)`` attributes again: ``keys`` (instruction name and
        clock), ``iterations`` and ``spans`` ([begin, end, key]) on the GPU backend's clock in
        seconds, and ``counter`` ([time, joules] at each observed change). Layout in
        docs/formats.md; keep it to compare attribution methods offline."""
        return json.loads(self._opt._last_window_trace())

    def close(self):
        """Stops the clock thread and restores the GPU's default clocks (idempotent)."""
        if self._opt is not None:
            self._opt.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._opt is None or self._opt.closed:
            return "<perseus.PipelineFrequencyOptimizer (closed)>"
        return (f"<perseus.PipelineFrequencyOptimizer job_id={self.job_id!r} "
                f"round={self.round} degraded={self.degraded}>")
