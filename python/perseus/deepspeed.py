"""Perseus on DeepSpeed's pipeline engine, attached in one line::

    import perseus.deepspeed
    engine, _, _, _ = deepspeed.initialize(model=pipeline_module, ...)
    attachment = perseus.deepspeed.attach(engine, "http://perseus-server:7787")
    for _ in range(steps):
        engine.train_batch(data_iter)             # unchanged
    attachment.detach()

``PipelineEngine`` runs its instructions through ``_INSTRUCTION_MAP``, a class dict of the
engine's functions captured when the class was defined: overriding ``_exec_forward_pass`` on a
subclass or instance changes nothing. ``attach`` gives this engine instance a map of its own whose
``ForwardPass`` and ``BackwardPass`` entries are bracketed as instructions (``forward``,
``backward`` of this rank's stage), and brackets ``train_batch`` as the iteration;
``eval_batch`` (forward only) reports nothing. The job registers the order DeepSpeed runs, every
stage's ``TrainSchedule`` (1F1B), so the server plans for it. DeepSpeed's instructions carry a
buffer id, not a microbatch: each stage's forwards and backwards are numbered in the order they
run, which is microbatch order in DeepSpeed's 1F1B.
"""

from perseus._attachment import (Attachment, distributed_ranks, make_optimizer,
                                 number_in_run_order)

__all__ = ["attach", "pipeline_order"]


def pipeline_order(micro_batches, stages):
    """Every stage's compute actions in DeepSpeed's TrainSchedule: ``{stage: ["0F0", ...]}``."""
    from deepspeed.runtime.pipe import schedule as ds_schedule

    order = {}
    for stage in range(stages):
        actions = []
        for step in ds_schedule.TrainSchedule(micro_batches=micro_batches, stages=stages,
                                              stage_id=stage).steps():
            for cmd in step:
                if isinstance(cmd, ds_schedule.ForwardPass):
                    actions.append(f"{stage}F")
                elif isinstance(cmd, ds_schedule.BackwardPass):
                    actions.append(f"{stage}B")
        order[stage] = number_in_run_order(actions)
    return order


def attach(engine, server_url=None, *, optimizer=None, device_id=None, **client_options):
    """Attaches Perseus to a DeepSpeed ``PipelineEngine`` on this rank; returns an
    :class:`perseus._attachment.Attachment` (``detach()`` undoes it).

    Every rank calls it after ``deepspeed.initialize``. Ranks and degrees come from the engine
    (``global_rank``, its grid's data-parallel id, stage and slice-parallel rank, and their sizes).
    ``device_id`` defaults to the engine's local device (0 without CUDA). ``client_options`` are
    :class:`perseus.PipelineFrequencyOptimizer`'s keywords, or pass an ``optimizer`` made
    elsewhere.
    """
    from deepspeed.runtime.pipe import schedule as ds_schedule

    if not hasattr(engine, "_INSTRUCTION_MAP") or not hasattr(engine, "train_batch"):
        raise TypeError(f"perseus.deepspeed.attach: {type(engine).__name__} is not a DeepSpeed "
                        "PipelineEngine (deepspeed.initialize with a PipelineModule makes one)")
    grid = engine.grid
    pp_rank, pp_degree = int(engine.stage_id), int(engine.num_stages)
    dp_rank, dp_degree = int(grid.data_parallel_id), int(grid.data_parallel_size)
    tp_rank = int(grid.get_slice_parallel_rank())
    tp_degree = int(grid.get_slice_parallel_world_size())
    rank, world_size = distributed_ranks(int(engine.global_rank),
                                         pp_degree * dp_degree * tp_degree)
    if device_id is None:
        device = getattr(engine, "device", None)
        device_id = getattr(device, "index", None) or 0
    order = pipeline_order(int(engine.micro_batches), pp_degree)
    optimizer, own = make_optimizer(order, pp_rank, pp_degree, rank, world_size, dp_rank,
                                    tp_rank, dp_degree, tp_degree, device_id, server_url,
                                    optimizer, client_options, [pp_rank],
                                    "perseus.deepspeed.attach")
    attachment = Attachment(engine, optimizer, order, pp_rank, own)
    table = dict(engine._INSTRUCTION_MAP)
    for cls, kind in ((ds_schedule.ForwardPass, "forward"), (ds_schedule.BackwardPass,
                                                               "backward")):
        table[cls] = attachment.instruction(table[cls], kind, pp_rank)
    attachment.replace(engine, "_INSTRUCTION_MAP", table)
    attachment.replace(engine, "train_batch", attachment.iteration(engine.train_batch))
    return attachment
