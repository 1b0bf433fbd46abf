"""Megatron-core 0.16's real schedules module with perseus.megatron attached, in one CPU process
(gloo, pipeline size 1): what runs on CPU of it runs for real, forward_step and backward_step on
a small model with Megatron's own loss and gradient handling.

Megatron's drivers allocate on CUDA unconditionally (a token counter, `device="cuda"`), so the
no-pipelining driver is stood in for by the same loop without that counter, installed in the
schedules module as the driver before attach, and called through get_forward_backward_func() as
a training loop calls it. The stand-in calls forward_step / backward_step through the module's
attributes, as Megatron's drivers do (the test checks that they do).

    megatron_rank.py URL PROFILE ITERATIONS OUT_JSON
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from processes import free_port

MICROBATCHES = 4


class Model(nn.Sequential):
    """Two linear layers with what Megatron asks of a model (set_input_tensor, config,
    model_type)."""

    def set_input_tensor(self, tensor):
        self.input_tensor = tensor


def main():
    url, profile, iterations, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.core.enums import ModelType
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel import schedules

    import perseus.megatron

    parallel_state.initialize_model_parallel(1, 1)
    torch.manual_seed(0)
    model = Model(nn.Linear(8, 8), nn.Linear(8, 8))
    model.config = ModelParallelConfig(pipeline_model_parallel_size=1)
    model.model_type = ModelType.encoder_or_decoder

    def no_pipelining_on_cpu(*, forward_step_func, data_iterator, model, num_microbatches,
                             forward_only=False, **unused):
        store = []
        for i in range(num_microbatches):
            output, _ = schedules.forward_step(forward_step_func, data_iterator, model,
                                               num_microbatches, None, store, model.config, 1,
                                               current_microbatch=i)
            if not forward_only:
                schedules.backward_step(None, output, None, model.model_type, model.config)
        return store

    schedules.forward_backward_no_pipelining = no_pipelining_on_cpu
    attachment = perseus.megatron.attach(url, num_microbatches=MICROBATCHES, gpu="sim",
                                         profile=profile, counter="ideal", report_every=2)

    def step(data_iterator, model):
        x, y = next(data_iterator)
        output = model(x)
        return output, lambda o: (((o - y) ** 2).mean(), {"loss": ((o - y) ** 2).mean()})

    data = iter([(torch.randn(2, 8), torch.randn(2, 8)) for _ in range(1000)])
    seen = []
    for _ in range(iterations):
        func = schedules.get_forward_backward_func()
        func(forward_step_func=step, data_iterator=data, model=model,
             num_microbatches=MICROBATCHES, seq_length=8, micro_batch_size=2)
        seen.append(attachment.last_iteration)
    func(forward_step_func=step, data_iterator=data, model=model,
         num_microbatches=MICROBATCHES, seq_length=8, micro_batch_size=2, forward_only=True)
    opt = attachment.optimizer
    try:
        schedules.forward_backward_pipelining_with_interleaving(forward_step_func=step)
        interleaved = "ran"
    except NotImplementedError as e:
        interleaved = str(e)
    result = {"job_id": opt.job_id, "rank_order": attachment.rank_order, "seen": seen,
              "after_eval": attachment.last_iteration, "round": opt.round,
              "mismatched_iterations": opt.mismatched_iterations, "degraded": opt.degraded,
              "interleaved": interleaved, "grad": float(model[0].weight.grad.norm())}
    attachment.detach()
    result["restored"] = (schedules.forward_backward_no_pipelining is no_pipelining_on_cpu and
                          schedules.forward_step.__module__ == schedules.__name__)
    with open(out, "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
