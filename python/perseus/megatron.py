"""Perseus on Megatron-core's pipeline schedules, attached in one line::

    import perseus.megatron
    attachment = perseus.megatron.attach("http://perseus-server:7787", num_microbatches=8)
    forward_backward_func = get_forward_backward_func()          # as before
    losses = forward_backward_func(..., forward_only=False)      # reported as one iteration
    attachment.detach()

Megatron-core has no per-microbatch hook, but its drivers (``forward_backward_no_pipelining`` and
``forward_backward_pipelining_without_interleaving``) look ``forward_step`` and ``backward_step`` up
in ``megatron.core.pipeline_parallel.schedules`` at call time, and ``get_forward_backward_func``
looks the drivers up there too. ``attach`` replaces those module attributes: each driver call with
``forward_only=False`` is an iteration, and each ``forward_step`` / ``backward_step`` inside it an
instruction of this rank's stage; evaluation (``forward_only=True``) reports nothing. The job
registers Megatron's non-interleaved 1F1B order for every stage (``min(pp - rank - 1, M)``
warm-up forwards, then forward-backward pairs, then the remaining backwards), which the driver
runs. Interleaved schedules (a virtual pipeline size) are refused: their backward calls do not
say which model chunk they run.

Megatron-core allocates on CUDA unconditionally (``device="cuda"`` in its drivers and its
point-to-point code), so nothing of it runs without a GPU: CI checks the dispatch this relies on
against the real package, and ``bench/gpu/megatron_attach.py`` runs it on a GPU machine.
"""

import sys

from perseus._attachment import Attachment, distributed_ranks, make_optimizer

__all__ = ["attach", "pipeline_order", "DRIVERS"]

# The drivers attach brackets as iterations, by their name in megatron's schedules module.
DRIVERS = ("forward_backward_no_pipelining", "forward_backward_pipelining_without_interleaving")
_INTERLEAVED = "forward_backward_pipelining_with_interleaving"


def pipeline_order(num_microbatches, pp_degree):
    """Every stage's actions in Megatron's non-interleaved 1F1B: ``{stage: ["0F0", ...]}``."""
    order = {}
    for stage in range(pp_degree):
        warmup = min(pp_degree - stage - 1, num_microbatches)
        actions = [f"{stage}F{m}" for m in range(warmup)]
        for m in range(num_microbatches - warmup):
            actions += [f"{stage}F{warmup + m}", f"{stage}B{m}"]
        actions += [f"{stage}B{m}" for m in range(num_microbatches - warmup, num_microbatches)]
        order[stage] = actions
    return order


def _refuse_interleaved(*args, **kwargs):
    raise NotImplementedError(
        "perseus.megatron: the interleaved (virtual pipeline) schedule is not supported yet: its "
        "backward_step calls do not say which model chunk they run; detach, or use the client's "
        "hooks with each chunk's stage (docs/integration.md)")


def attach(server_url=None, *, num_microbatches, optimizer=None, device_id=None,
           **client_options):
    """Attaches Perseus to Megatron-core's pipeline schedules in this process; returns an
    :class:`perseus._attachment.Attachment` (``detach()`` undoes it).

    Call it on every rank after ``parallel_state.initialize_model_parallel``; ranks and degrees
    come from ``parallel_state``. ``num_microbatches`` is what the training passes to the
    forward-backward function each iteration. ``client_options`` are
    :class:`perseus.PipelineFrequencyOptimizer`'s keywords, or pass an ``optimizer``.
    """
    from megatron.core import parallel_state as ps
    from megatron.core.pipeline_parallel import schedules

    if ps.get_virtual_pipeline_model_parallel_world_size() not in (None, 1):
        _refuse_interleaved()
    pp_rank = ps.get_pipeline_model_parallel_rank()
    pp_degree = ps.get_pipeline_model_parallel_world_size()
    dp_rank, dp_degree = ps.get_data_parallel_rank(), ps.get_data_parallel_world_size()
    tp_rank = ps.get_tensor_model_parallel_rank()
    tp_degree = ps.get_tensor_model_parallel_world_size()
    rank, world_size = distributed_ranks(pp_rank, pp_degree * dp_degree * tp_degree)
    if device_id is None:
        torch = sys.modules.get("torch")
        device_id = torch.cuda.current_device() if torch and torch.cuda.is_available() else 0
    order = pipeline_order(int(num_microbatches), pp_degree)
    optimizer, own = make_optimizer(order, pp_rank, pp_degree, rank, world_size, dp_rank,
                                    tp_rank, dp_degree, tp_degree, device_id, server_url,
                                    optimizer, client_options, [pp_rank],
                                    "perseus.megatron.attach")
    attachment = Attachment(schedules, optimizer, order, pp_rank, own)
    attachment.replace(schedules, "forward_step", attachment.instruction(
        schedules.forward_step, "forward", pp_rank, (-1, "current_microbatch")))
    attachment.replace(schedules, "backward_step", attachment.instruction(
        schedules.backward_step, "backward", pp_rank))
    for name in DRIVERS:
        driver = getattr(schedules, name)
        attachment.replace(schedules, name, attachment.iteration(
            driver, lambda a, k: not k.get("forward_only", False)))
    attachment.replace(schedules, _INTERLEAVED, _refuse_interleaved)
    return attachment
