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

import torch

from perseus._attachment import (Attachment, distributed_ranks, make_optimizer,
                                 number_in_run_order)

__all__ = ["Attachment", "attach", "pipeline_order"]

_COMPUTE = ("F", "B", "I", "W")

# What attach wraps on each stage: (method, kind, where its microbatch is). The kind of
# ``backward_one_chunk(bwd_chunk_id, loss=None, full_backward=True, last_backward=False)`` is B
# when full_backward (by keyword or third positional argument, default True), else I.
_WRAPPED = (
    ("forward_one_chunk", "forward", (0, "fwd_chunk_id")),
    ("backward_one_chunk", ("backward", "backward_input", 2, "full_backward", True),
     (0, "bwd_chunk_id")),
    ("backward_weight_one_chunk", "backward_weight", (0, "bwd_chunk_id")),
)


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
        if sub is not None or kind in _COMPUTE:
            out.append(str(action))
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
        out[int(rank)] = number_in_run_order(texts) if single else texts
    return out


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
    default_rank, default_world = distributed_ranks(pp_rank, pp_degree * dp_degree * tp_degree)
    rank = default_rank if rank is None else int(rank)
    world_size = default_world if world_size is None else int(world_size)
    if device_id is None:
        device_id = torch.cuda.current_device() if torch.cuda.is_available() else 0
    optimizer, own = make_optimizer(
        order, pp_rank, pp_degree, rank, world_size, dp_rank, tp_rank, dp_degree, tp_degree,
        device_id, server_url, optimizer, client_options, [int(s.stage_index) for s in stages],
        "perseus.torch.attach")
    attachment = Attachment(schedule, optimizer, order, pp_rank, own)
    for stage in stages:
        index = int(stage.stage_index)
        for name, kind, microbatch in _WRAPPED:
            attachment.replace(stage, name, attachment.instruction(
                getattr(stage, name), kind, index, microbatch))
    attachment.replace(schedule, "step", attachment.iteration(
        schedule.step, lambda a, k: getattr(schedule, "_has_backward", True)))
    return attachment
