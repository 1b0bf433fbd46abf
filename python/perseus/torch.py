"""Perseus on torch.distributed.pipelining, attached in one line::

    import perseus.torch
    schedule = ScheduleZBVZeroBubble(stages, n_microbatches=8, loss_fn=loss_fn)
    attachment = perseus.torch.attach(schedule, "http://perseus-server:7787")
    for batch in loader:
        schedule.step(batch, target=target)      # unchanged: Perseus sets the clocks
    attachment.detach()                           # everything as it was; default clocks

torch's pipelining has no hook API, but every schedule class dispatches compute through three
methods of its stage objects: ``forward_one_chunk`` (F), ``backward_one_chunk`` (B when
``full_backward``, else I: the input gradient) and ``backward_weight_one_chunk`` (W), called once
the schedule has received the microbatch's input, so that wrapping them brackets compute and not
the point-to-point wait. ``attach`` wraps them on this rank's stage instances and ``schedule.step``
as the iteration (instance attributes: the classes, and every other schedule, stay as they are).
Forward-only evaluation (``schedule.eval``, or a schedule without a loss) reports nothing.

The job registers with the order torch will run: ``schedule.pipeline_order`` (every rank's
actions), sent as the job's ``pipeline_order`` so that the server plans for exactly that order,
whatever the schedule class (a CSV-loaded runtime schedule included). A loop that then runs
something else is said once per reporting window, as the client always does.

GPU timing: a stage method returns when its work is enqueued, not done. With the NVML backend the
client synchronises the device at every instruction boundary (``torch.cuda.synchronize``, as Zeus
does), so each instruction's clock is set and its time taken around its own kernels; the cost is
the queue the synchronisation drains, which a pipeline stage mostly has drained anyway when it
waits for its neighbour. A simulated GPU (``gpu="sim"``) needs no synchronisation.
"""

import time

import torch
import torch.distributed as dist

from perseus.optimizer import PipelineFrequencyOptimizer

__all__ = ["Attachment", "attach", "pipeline_order"]

# The stage methods wrapped, and how each call names its instruction kind.
_FORWARD = "forward_one_chunk"
_BACKWARD = "backward_one_chunk"
_BACKWARD_WEIGHT = "backward_weight_one_chunk"
_LETTERS = {"forward": "F", "backward": "B", "backward_input": "I", "backward_weight": "W"}


def _full_backward(args, kwargs):
    """``backward_one_chunk(bwd_chunk_id, loss=None, full_backward=True, last_backward=False)``'s
    full_backward, passed by keyword or position."""
    if "full_backward" in kwargs:
        return bool(kwargs["full_backward"])
    return bool(args[2]) if len(args) > 2 else True


def _stages_of(schedule):
    """This rank's stage objects: ``_stages`` of a multi-stage schedule, ``_stage`` of a
    single-stage one."""
    stages = getattr(schedule, "_stages", None)
    if stages is None:
        stage = getattr(schedule, "_stage", None)
        stages = [] if stage is None else [stage]
    if not stages:
        raise TypeError(f"perseus.torch.attach: {type(schedule).__name__} holds no pipeline "
                        "stages (expected a torch.distributed.pipelining schedule: "
                        "ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B, ...)")
    return list(stages)


def _compute_texts(actions):
    """One rank's compute actions as text ("0F3"), idle steps and bookkeeping (sends, receives,
    unshard, reduce) left out; an overlapped pair stays one item, "(0F3;3B1)OVERLAP_F_B"."""
    out = []
    for action in actions:
        if action is None:
            continue
        sub = getattr(action, "sub_actions", None)
        kind = getattr(action.computation_type, "value", str(action.computation_type))
        if sub is not None or kind in _LETTERS.values():
            out.append(str(action))
    return out


def _renumbered(texts):
    """Microbatches numbered 0, 1, ... per (stage, kind) in the order the actions run."""
    seen, out = {}, []
    for text in texts:
        i = 0
        while text[i].isdigit():
            i += 1
        key = text[:i + 1]
        out.append(f"{key}{seen.get(key, 0)}")
        seen[key] = seen.get(key, 0) + 1
    return out


def pipeline_order(schedule):
    """Every rank's compute actions as torch will run them: ``{rank: ["0F0", "0F1", ...]}`` from
    ``schedule.pipeline_order``.

    torch 2.11 displays Schedule1F1B's last rank with its microbatches shifted by one (F1..F8,
    while it runs F0..F7); the single-stage schedules (GPipe, 1F1B) run each kind's microbatches
    in order, so their actions are numbered as they run."""
    order = getattr(schedule, "pipeline_order", None)
    if not order:
        raise TypeError(f"perseus.torch.attach: {type(schedule).__name__} has no "
                        "pipeline_order (torch >= 2.6 builds one for every schedule class)")
    single = hasattr(schedule, "_stage") and not hasattr(schedule, "_stages")
    out = {}
    for rank in sorted(order):
        texts = _compute_texts(order[rank])
        out[int(rank)] = _renumbered(texts) if single else texts
    return out


class Attachment:
    """What :func:`attach` did to a schedule: ``optimizer`` (the
    :class:`perseus.PipelineFrequencyOptimizer`), ``pipeline_order`` (every rank's actions, as
    registered), ``rank_order`` (this rank's), ``last_iteration`` (the actions this rank's hooks
    saw in its last training step, e.g. ``["0F0", "0F1", "0B0", ...]``), ``hook_seconds`` (the
    time spent in Perseus's hooks so far, on this rank's training thread: what attaching costs
    it, window closes included), and :meth:`detach`."""

    def __init__(self, schedule, optimizer, order, pp_rank, own_optimizer):
        self.schedule = schedule
        self.optimizer = optimizer
        self.pipeline_order = order
        self.rank_order = order.get(pp_rank, [])
        self.last_iteration = []
        self._current = []
        self._in_step = False
        self._own_optimizer = own_optimizer
        self._saved = []  # (object, attribute, the instance's own value or _MISSING)
        self.hook_seconds = 0.0
        self._attached = True

    # Wrapping ----------------------------------------------------------------------------------

    def _replace(self, obj, name, make):
        """Sets ``obj.name`` (on the instance) to ``make(original bound method)``."""
        own = obj.__dict__.get(name, _MISSING)
        self._saved.append((obj, name, own))
        setattr(obj, name, make(getattr(obj, name)))

    def _instruction(self, stage, method, kind_of):
        opt, stage_index, attachment = self.optimizer, stage.stage_index, self

        def wrapped(*args, **kwargs):
            if not attachment._in_step:
                return method(*args, **kwargs)
            t0 = time.perf_counter()
            kind = kind_of(args, kwargs)
            chunk = args[0] if args else kwargs.get("fwd_chunk_id", kwargs.get("bwd_chunk_id"))
            attachment._current.append(f"{stage_index}{_LETTERS[kind]}{chunk}")
            opt.on_instruction_begin(kind, stage_index)
            t1 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                t2 = time.perf_counter()
                opt.on_instruction_end(kind, stage_index)
                attachment.hook_seconds += (t1 - t0) + (time.perf_counter() - t2)

        return wrapped

    def _step(self, method):
        opt, schedule, attachment = self.optimizer, self.schedule, self

        def step(*args, **kwargs):
            if not getattr(schedule, "_has_backward", True) or attachment._in_step:
                return method(*args, **kwargs)  # evaluation (forward only): not training
            t0 = time.perf_counter()
            attachment._current = []
            attachment._in_step = True
            opt.on_step_begin()
            t1 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                t2 = time.perf_counter()
                attachment._in_step = False
                attachment.last_iteration = attachment._current
                opt.on_step_end()
                attachment.hook_seconds += (t1 - t0) + (time.perf_counter() - t2)

        return step

    def _wrap(self, stages):
        for stage in stages:
            self._replace(stage, _FORWARD, lambda m, s=stage: self._instruction(
                s, m, lambda a, k: "forward"))
            self._replace(stage, _BACKWARD, lambda m, s=stage: self._instruction(
                s, m, lambda a, k: "backward" if _full_backward(a, k) else "backward_input"))
            self._replace(stage, _BACKWARD_WEIGHT, lambda m, s=stage: self._instruction(
                s, m, lambda a, k: "backward_weight"))
        self._replace(self.schedule, "step", self._step)

    # Undoing -----------------------------------------------------------------------------------

    @property
    def attached(self):
        return self._attached

    def detach(self):
        """Puts back every wrapped method and, when ``attach`` made the optimizer, closes it (the
        GPU's default clock and power limit come back). Idempotent."""
        if not self._attached:
            return
        self._attached = False
        for obj, name, own in reversed(self._saved):
            if own is _MISSING:
                obj.__dict__.pop(name, None)
            else:
                setattr(obj, name, own)
        self._saved.clear()
        if self._own_optimizer:
            self.optimizer.close()

    def write_schedule(self, path):
        """Writes every rank's order as CSV in torch's notation, one row per rank: what
        ``perseus plan --schedule-file`` plans for (the order this job registered)."""
        with open(path, "w", encoding="utf-8") as f:
            for rank in sorted(self.pipeline_order):
                f.write(",".join(self.pipeline_order[rank]) + "\n")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False

    def __repr__(self):
        state = "attached" if self._attached else "detached"
        return (f"<perseus.torch.Attachment {type(self.schedule).__name__} {state} "
                f"job_id={self.optimizer.job_id!r}>")


_MISSING = object()


def _default_ranks(pp_rank, pp_degree, dp_degree, tp_degree):
    """(rank, world_size) from torch.distributed when initialized, else the pipeline alone."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return pp_rank, pp_degree * dp_degree * tp_degree


def attach(schedule, server_url=None, *, optimizer=None, rank=None, world_size=None, dp_rank=0,
           tp_rank=0, dp_degree=1, tp_degree=1, device_id=None, **client_options):
    """Attaches Perseus to a torch.distributed.pipelining schedule on this rank; returns an
    :class:`Attachment` (``detach()`` undoes it).

    Every rank of the pipeline calls it with its own schedule object, after
    ``init_process_group`` (rank 0 registers the job; the id is broadcast). The pipeline position
    and depth come from the schedule (``pp_rank``, ``pp_degree``: its stages' group rank and
    size); ``rank`` and ``world_size`` default to torch.distributed's; with data or tensor
    parallelism pass ``dp_rank``, ``tp_rank``, ``dp_degree``, ``tp_degree`` (torchtitan: from its
    device mesh). ``device_id`` defaults to the current CUDA device (0 without CUDA).

    ``client_options`` are :class:`perseus.PipelineFrequencyOptimizer`'s keywords (``gpu``,
    ``observe``, ``token``, ``ca_file``, ``stall_bound``, ``report_every``, ``scheduler``, ...);
    with ``gpu="sim"`` the simulated GPU runs this rank's stages of ``profile``. Or pass an
    ``optimizer`` made elsewhere (it must not have registered another order); ``detach`` then
    leaves it open.
    """
    stages = _stages_of(schedule)
    order = pipeline_order(schedule)
    pp_rank, pp_degree = int(stages[0].group_rank), int(stages[0].group_size)
    if set(order) != set(range(pp_degree)):
        raise ValueError(f"perseus.torch.attach: the schedule's pipeline_order covers ranks "
                         f"{sorted(order)} but its stages' group has {pp_degree} ranks")
    default_rank, default_world = _default_ranks(pp_rank, pp_degree, dp_degree, tp_degree)
    rank = default_rank if rank is None else int(rank)
    world_size = default_world if world_size is None else int(world_size)
    if world_size != pp_degree * dp_degree * tp_degree:
        raise ValueError(f"perseus.torch.attach: world_size {world_size} is not pp_degree "
                         f"{pp_degree} x dp_degree {dp_degree} x tp_degree {tp_degree}; pass "
                         "dp_degree and tp_degree (and dp_rank, tp_rank) for data or tensor "
                         "parallelism")
    if device_id is None:
        device_id = torch.cuda.current_device() if torch.cuda.is_available() else 0
    own = optimizer is None
    if own:
        if client_options.get("gpu") == "sim" and "stage" not in client_options:
            indices = [int(s.stage_index) for s in stages]
            client_options["stage"] = indices[0] if len(indices) == 1 else indices
        optimizer = PipelineFrequencyOptimizer(
            rank, dp_rank, pp_rank, tp_rank, device_id, dp_degree, pp_degree, tp_degree,
            world_size, server_url, pipeline_order={str(r): a for r, a in order.items()},
            **client_options)
    elif client_options or server_url is not None:
        raise TypeError("perseus.torch.attach: pass either optimizer= or the client's options "
                        "(server_url, gpu, ...), not both")
    attachment = Attachment(schedule, optimizer, order, pp_rank, own)
    attachment._wrap(stages)
    return attachment
