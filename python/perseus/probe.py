"""Read-only GPU probe: ``perseus gpu probe`` from Python (docs/architecture.md, section 9).

``perseus.gpu_probe(device=0)`` opens the CUDA device ``device`` through NVML
(``CUDA_VISIBLE_DEVICES`` applies), changes nothing on it, polls its total-energy counter for
``duration`` seconds and returns a dict with the same fields as ``perseus gpu probe --json``:
``name``, ``driver``, ``uuid``, ``nvml_index``, ``cuda_index``, ``sm_clocks_mhz`` (highest
first), ``duration_s``, ``counter_reads``, ``counter_changes``, ``refresh_period_s``
(``{"mean", "min", "max"}`` or ``None`` with fewer than two counter changes), ``read_cost_s``
(``{"mean", "max"}``, ``None`` without reads), ``counter_error`` (``None``, or why the GPU has no
energy counter: NVML's Not Supported, as before Volta), ``power_w`` (``{"readings", "mean",
"counter_slope"}``), ``sm_clock_mhz`` (``{"mean", "min", "max"}``), ``clock_event_reasons``
(every reason the driver gave for the clock while probed, e.g. ``["sw_power_cap"]``) and
``power_limit_w`` (``{"enforced", "default"}``). A query the device does not answer (no power
management, some virtual GPUs) reads ``None``; the probe goes on without it.
"""

import json

from perseus import _perseus

DEFAULT_LIBRARY = "libnvidia-ml.so.1"


def gpu_probe(device=0, library=None, duration=1.5, timeout=10.0):
    """Probes CUDA device ``device`` read-only; raises perseus.PerseusError on failure.

    ``library`` is the NVML library to load (default: the driver's libnvidia-ml.so.1). A driver
    that has not answered ``timeout`` seconds after ``duration`` (NVML blocks its callers for good
    on a GPU that has fallen off the bus) raises perseus.PerseusError too; the blocked call is
    left behind on a thread of its own.
    """
    return json.loads(_perseus._gpu_probe(int(device), library or DEFAULT_LIBRARY,
                                          float(duration), float(timeout)))
