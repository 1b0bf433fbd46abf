"""Runs Zeus's own pipeline-frequency client (zeus 0.16, `zeus.optimizer.pipeline_frequency.
PipelineFrequencyOptimizer`, unmodified) on RANKS gloo processes against a Perseus server, with
NVML from the fake libnvidia-ml on LD_LIBRARY_PATH (one fake GPU per rank).

    zeus_ranks.py URL RANKS ITERATIONS OUT_DIR

Each rank runs ITERATIONS 1F1B iterations of microbatches (the plan's own instruction list, which
Zeus's client checks name by name), then stops Zeus's clock process and writes rankN.json (the
schedule it got). Each rank's NVML calls, its clock process's included, go to OUT_DIR/nvmlN.log.

There is no CUDA here: torch.cuda.is_available (Zeus requires it), torch.cuda.set_device and
torch.cuda.synchronize (called for the device it controls) are made to answer as on a GPU machine,
after the process group is up; everything else (registration, the job id broadcast,
the schedule barrier, the instruction checks, clocks set through NVML in a separate process) is
Zeus's own code.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from processes import spawn


def rank_main(rank, url, ranks, iterations, out, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      FAKE_NVML_LOG=os.path.join(out, f"nvml{rank}.log"))
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    torch.cuda.is_available = lambda: True
    torch.cuda.set_device = lambda device: None
    torch.cuda.synchronize = lambda device=None: None
    from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer

    opt = PipelineFrequencyOptimizer(rank=rank, dp_rank=0, pp_rank=rank, tp_rank=0,
                                     device_id=rank, dp_degree=1, pp_degree=ranks, tp_degree=1,
                                     world_size=ranks, server_url=url, job_metadata="zeus")
    names = [name for name, _ in opt.freq_schedule]
    for _ in range(iterations):
        opt.on_step_begin()
        for name in names:
            opt.on_instruction_begin(name)
            opt.on_instruction_end(name)
        opt.on_step_end()
    opt.frequency_controller.end()
    opt.frequency_controller._proc.join(30)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"job_id": opt.job_id, "schedule": [list(p) for p in opt.freq_schedule],
                   "controller_exit": opt.frequency_controller._proc.exitcode}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    url, ranks, iterations, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    spawn(rank_main, ranks, url, ranks, iterations, out)


if __name__ == "__main__":
    main()
