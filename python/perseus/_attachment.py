"""What the framework adapters (perseus.torch, perseus.deepspeed, perseus.megatron) share: an
:class:`Attachment` that replaces a framework's functions on the instances that run them (never on
their classes), brackets each instruction and each training iteration with the client's hooks,
records what it saw, and undoes all of it on :meth:`Attachment.detach`.

An adapter says, per wrapped function, which instruction kind a call is and of which stage, and
which call is a training iteration; everything else (forward-only evaluation, calls outside a
training iteration) runs untouched and reports nothing.
"""

import time

from perseus import _perseus
from perseus.optimizer import PipelineFrequencyOptimizer, _torch_distributed

_MISSING = object()


class Attachment:
    """An adapter's attachment to one framework object on this rank: ``optimizer`` (the
    :class:`perseus.PipelineFrequencyOptimizer`), ``pipeline_order`` (every rank's actions in
    PyTorch's notation, as the job registered them), ``rank_order`` (this rank's),
    ``last_iteration`` (the actions this rank's hooks saw in its last training iteration, e.g.
    ``["0F0", "0F1", "0B0", ...]``), ``hook_seconds`` (the time this rank's training thread spent
    in Perseus's hooks so far, window closes included: what attaching costs it), and
    :meth:`detach`."""

    def __init__(self, target, optimizer, order, pp_rank, own_optimizer):
        self.target = target
        self.optimizer = optimizer
        self.pipeline_order = order
        self.rank_order = order.get(pp_rank, [])
        self._state = _perseus._BracketState()
        self._own_optimizer = own_optimizer
        self._saved = []  # (object, attribute, the instance's own value or _MISSING)
        self._attached = True

    # Wrapping (for the adapters) ---------------------------------------------------------------

    def replace(self, obj, name, value):
        """Sets ``obj.name`` on the instance, keeping what the instance itself had for detach."""
        self._saved.append((obj, name, obj.__dict__.get(name, _MISSING)))
        setattr(obj, name, value)

    def instruction(self, function, kind, stage, microbatch=None):
        """``function`` bracketed as one instruction of ``stage`` while a training iteration runs
        (a C++ callable, ``perseus._perseus._bracket``: no Python frame per call). ``kind`` names
        its kind, or chooses between two by one of the call's arguments: ``(if_set, otherwise,
        position, keyword, default)``. ``microbatch`` is ``(position, keyword)``, the call's
        argument that holds its microbatch (position -1: keyword only); where it is None or the
        call does not pass it, each (stage, kind)'s calls are numbered in the order they run."""
        begin, end = self.optimizer._instruction_hooks()
        return _perseus._bracket(function, begin, end, self._state, kind, stage, microbatch)

    def iteration(self, function, training=lambda args, kwargs: True):
        """``function`` bracketed as one training iteration when ``training(args, kwargs)`` says
        the call is one (not a forward-only evaluation) and no iteration is running already."""
        opt, state = self.optimizer, self._state

        def step(*args, **kwargs):
            if state.in_step or not training(args, kwargs):
                return function(*args, **kwargs)
            t0 = time.perf_counter()
            state.begin_iteration()
            opt.on_step_begin()
            t1 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                t2 = time.perf_counter()
                state.end_iteration()
                opt.on_step_end()
                state.hook_seconds += (t1 - t0) + (time.perf_counter() - t2)

        return step

    # For the user ------------------------------------------------------------------------------

    @property
    def last_iteration(self):
        return self._state.last_iteration

    @property
    def hook_seconds(self):
        return self._state.hook_seconds

    @property
    def attached(self):
        return self._attached

    def detach(self, keep_optimizer=False):
        """Puts back everything replaced and, when the adapter made the optimizer, closes it (the
        GPU's default clock and power limit come back). ``keep_optimizer=True`` leaves it open
        and the caller's: the job stays registered, and ``attach(..., optimizer=
        attachment.optimizer)`` attaches it again (the caller closes it in the end). Idempotent."""
        if not self._attached:
            return
        self._attached = False
        for obj, name, own in reversed(self._saved):
            if own is _MISSING:
                obj.__dict__.pop(name, None)
            else:
                setattr(obj, name, own)
        self._saved.clear()
        if self._own_optimizer and not keep_optimizer:
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
        return (f"<perseus.Attachment {type(self.target).__name__} {state} "
                f"job_id={self.optimizer.job_id!r}>")


def distributed_ranks(rank, world_size):
    """(rank, world_size) from torch.distributed when it is initialized, else the arguments."""
    dist = _torch_distributed()
    return (dist.get_rank(), dist.get_world_size()) if dist is not None else (rank, world_size)


def number_in_run_order(actions):
    """Actions in PyTorch's notation ("0F", or "0F7": stage, kind and any microbatch) with their
    microbatches numbered 0, 1, ... per (stage, kind) in the order given: a schedule that runs
    each kind's microbatches in order, whose own numbers are missing or not to be trusted."""
    seen, out = {}, []
    for action in actions:
        i = 0
        while action[i].isdigit():
            i += 1
        key = action[:i + 1]
        out.append(f"{key}{seen.get(key, 0)}")
        seen[key] = seen.get(key, 0) + 1
    return out


def make_optimizer(order, pp_rank, pp_degree, rank, world_size, dp_rank, tp_rank, dp_degree,
                   tp_degree, device_id, server_url, optimizer, client_options, stages, who):
    """(the client, whether the adapter made it): ``optimizer`` when given (then no client
    options may be), else a new :class:`perseus.PipelineFrequencyOptimizer` that registers
    ``order``; with ``gpu="sim"`` its simulated GPU runs ``stages`` (this rank's stage indices)
    unless ``stage`` says otherwise."""
    if optimizer is not None:
        if client_options or server_url is not None:
            raise TypeError(f"{who}: pass either optimizer= or the client's options (server_url, "
                            "gpu, ...), not both")
        return optimizer, False
    if world_size != pp_degree * dp_degree * tp_degree:
        raise ValueError(f"{who}: world_size {world_size} is not pp_degree {pp_degree} x "
                         f"dp_degree {dp_degree} x tp_degree {tp_degree}; pass dp_degree and "
                         "tp_degree (and dp_rank, tp_rank) for data or tensor parallelism")
    if client_options.get("gpu") == "sim" and "stage" not in client_options:
        client_options["stage"] = stages[0] if len(stages) == 1 else list(stages)
    return PipelineFrequencyOptimizer(
        rank, dp_rank, pp_rank, tp_rank, device_id, dp_degree, pp_degree, tp_degree, world_size,
        server_url, pipeline_order=order, **client_options), True
