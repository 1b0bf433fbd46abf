"""One rank's pipeline with torch.distributed.pipelining: the model's stages this rank holds as
``PipelineStage`` objects, and the schedule object that runs them (any schedule class torch has,
or a runtime schedule loaded from a CSV in torch's notation).

Stage ``s`` runs on rank ``s % ranks`` (looped schedules) or, for the V-shaped ones (ZBV,
DualPipeV), ranks ``r`` holds stages ``r`` and ``2 ranks - 1 - r``, as torch places them.
"""

import os

import torch
import torch.distributed.pipelining as pipelining
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

from model import loss_fn, stage_module

# Our names for torch's schedule classes (the CLI's --schedule names).
SCHEDULES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved-1f1b": "ScheduleInterleaved1F1B",
    "looped-bfs": "ScheduleLoopedBFS",
    "interleaved-zero-bubble": "ScheduleInterleavedZeroBubble",
    "zbv": "ScheduleZBVZeroBubble",
    "dualpipev": "ScheduleDualPipeV",
}
SINGLE_STAGE = ("gpipe", "1f1b")
V_SHAPED = ("zbv", "dualpipev")


def available_schedules():
    """The names above whose class this torch has (DualPipeV is newer than the others)."""
    return [name for name, cls in SCHEDULES.items() if hasattr(pipelining, cls)]


def stages_per_rank(name, requested):
    """1 for the single-stage schedules, 2 for the V-shaped ones, else ``requested``."""
    if name in SINGLE_STAGE:
        return 1
    if name in V_SHAPED:
        return 2
    return requested


def local_stages(name, rank, ranks, per_rank):
    """The stage indices rank ``rank`` holds."""
    if name in V_SHAPED:
        return [rank, 2 * ranks - 1 - rank]
    return [rank + k * ranks for k in range(per_rank)]


def _without_sends_to_self(stage):
    """torch 2.11's schedules open their stages' links with a send and a receive to each
    neighbour stage, one on the same rank included (the tip of a V, or every stage with one rank);
    gloo cannot send to its own rank (NCCL can), and torch sends nothing between two stages of one
    rank after that. So the links to this rank are left out."""
    ops_of = stage._get_init_p2p_neighbors_ops

    def ops():
        return [op for op in ops_of() if getattr(op, "group_peer", None) != stage.group_rank]

    stage._get_init_p2p_neighbors_ops = ops


def build(name, rank, ranks, microbatches, config, per_rank=2, seed=0, csv_path=None,
          device="cpu"):
    """(stage modules, schedule) of rank ``rank``. ``name`` is a key of SCHEDULES, or "csv" for a
    runtime schedule loaded from ``csv_path`` (torch's compute-only CSV, one row per rank; its
    stages per rank ``per_rank``, looped)."""
    per_rank = stages_per_rank(name, per_rank)
    num_stages = ranks * per_rank
    indices = local_stages(name, rank, ranks, per_rank)
    modules = [stage_module(config, s, num_stages, seed).to(device) for s in indices]
    stages = [PipelineStage(m, s, num_stages, torch.device(device))
              for m, s in zip(modules, indices)]
    for stage in stages:
        _without_sends_to_self(stage)
    if name == "csv":
        if not csv_path or not os.path.isfile(csv_path):
            raise ValueError(f"a CSV schedule needs an existing csv_path, got {csv_path!r}")
        schedule = _PipelineScheduleRuntime(stages, n_microbatches=microbatches, loss_fn=loss_fn)
        schedule._load_csv(csv_path)
        return modules, schedule
    cls = getattr(pipelining, SCHEDULES[name])
    if name in SINGLE_STAGE:
        return modules, cls(stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    return modules, cls(stages, n_microbatches=microbatches, loss_fn=loss_fn)
