"""Trains a small DeepSpeed PipelineModule (8 linear layers, 4 stages, 4 micro-batches) with
DeepSpeed's real PipelineEngine on RANKS gloo CPU processes (DeepSpeed's CPU accelerator), with
Perseus attached by perseus.deepspeed.attach on a simulated GPU, then runs one eval_batch.

    deepspeed_ranks.py URL PROFILE ITERATIONS OUT_DIR

Each rank writes rankN.json: the actions its hooks saw per iteration, DeepSpeed's order for its
stage as registered, the client's state and the losses.
"""

import json
import os
import sys

import torch
import torch.nn as nn

from processes import spawn

RANKS, MICRO_BATCHES, MICRO_BATCH_SIZE = 4, 4, 2


def rank_main(rank, url, profile, iterations, out, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(RANKS), LOCAL_RANK=str(rank), LOCAL_SIZE=str(RANKS))
    torch.set_num_threads(1)
    import deepspeed
    from deepspeed.pipe import PipelineModule

    import perseus.deepspeed

    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = PipelineModule(layers=[nn.Linear(16, 16) for _ in range(8)], num_stages=RANKS,
                           loss_fn=nn.MSELoss(), partition_method="uniform")
    config = {"train_batch_size": MICRO_BATCHES * MICRO_BATCH_SIZE,
              "train_micro_batch_size_per_gpu": MICRO_BATCH_SIZE, "steps_per_print": 10 ** 9}
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01), config=config)
    attachment = perseus.deepspeed.attach(engine, url, gpu="sim", profile=profile,
                                          counter="ideal", report_every=2,
                                          log=lambda m: print(f"[rank {rank}] warning: {m}",
                                                              file=sys.stderr, flush=True))
    g = torch.Generator().manual_seed(1)
    data = iter([(torch.randn(MICRO_BATCH_SIZE, 16, generator=g),
                  torch.randn(MICRO_BATCH_SIZE, 16, generator=g)) for _ in range(1000)])
    seen, losses = [], []
    for _ in range(iterations):
        losses.append(float(engine.train_batch(data_iter=data)))
        seen.append(attachment.last_iteration)
    engine.eval_batch(data_iter=data)  # forward only: not an iteration, nothing reported
    opt = attachment.optimizer
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"job_id": opt.job_id, "rank_order": attachment.rank_order, "seen": seen,
                   "round": opt.round, "degraded": opt.degraded, "losses": losses,
                   "mismatched_iterations": opt.mismatched_iterations,
                   "map_is_the_class_map": engine._INSTRUCTION_MAP is type(engine)._INSTRUCTION_MAP},
                  f)
    attachment.detach()
    with open(os.path.join(out, f"rank{rank}.detached"), "w") as f:
        f.write(str(engine._INSTRUCTION_MAP is type(engine)._INSTRUCTION_MAP))


def main():
    url, profile, iterations, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    spawn(rank_main, RANKS, url, profile, iterations, out)


if __name__ == "__main__":
    main()
