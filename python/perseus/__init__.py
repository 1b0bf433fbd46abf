"""Perseus: energy optimizer for pipeline-parallel training (Python client).

The training-side client of the Perseus control plane (docs/protocol.md), as a drop-in for
Zeus's ``PipelineFrequencyOptimizer``::

    import perseus
    opt = perseus.PipelineFrequencyOptimizer(rank, dp_rank, pp_rank, tp_rank, device_id,
                                             dp_degree, pp_degree, tp_degree, world_size,
                                             "http://127.0.0.1:7787")
    for batch in data:
        opt.on_step_begin()
        with opt.instruction("forward"):
            ...
        with opt.instruction("backward"):
            ...
        opt.on_step_end()

``gpu="sim"`` runs against a simulated GPU that follows a profile CSV (no GPU needed).
``perseus.gpu_probe()`` reports, read-only, what a GPU's NVML offers energy measurement;
``perseus.attribute()`` attributes a recorded window (``opt.last_window_trace``) again.

Planning, on the same C++ planner as ``perseus plan``::

    frontier = perseus.plan(perseus.read_profile("profile.csv"), microbatches=8,
                            blocking_power=83.64)
    frontier.max_slowdown("2%").export("plans/")

The package imports without torch; torch is imported lazily, only when it is used.
"""

from perseus._perseus import NVML_COUNTER_LAG_S, NVML_COUNTER_WINDOW_S
from perseus._perseus import NoEnergyCounter, NvmlGpu, PerseusError, SimGpu
from perseus._perseus import __version__
from perseus.attribution import attribute
from perseus.optimizer import PerseusWarning, PipelineFrequencyOptimizer
from perseus.planning import (Evaluation, Frontier, Plan, Profile, evaluate, load_frontier, plan,
                              read_profile)
from perseus.probe import gpu_probe
from perseus.sync import sync_device

__all__ = [
    "Evaluation",
    "Frontier",
    "NVML_COUNTER_LAG_S",
    "NVML_COUNTER_WINDOW_S",
    "NoEnergyCounter",
    "NvmlGpu",
    "PerseusError",
    "PerseusWarning",
    "PipelineFrequencyOptimizer",
    "Plan",
    "Profile",
    "SimGpu",
    "attribute",
    "evaluate",
    "gpu_probe",
    "load_frontier",
    "plan",
    "read_profile",
    "sync_device",
]

