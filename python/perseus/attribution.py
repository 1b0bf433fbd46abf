"""Attributing a recorded reporting window again, offline (README "Measuring energy").

``perseus.attribute(trace, method="busy-overlap")`` takes a trace (``opt.last_window_trace``, or
the same dict loaded from a JSON file; layout in docs/formats.md) and returns a dict: ``method``
(after any fallback), ``measured``, ``intervals`` (counter intervals fitted), ``idle_power_w``,
``keys`` (per instruction key: ``name``, ``mhz``, ``occurrences``, ``seconds``, ``power_w``,
``power_stderr_w`` (None when unknown) and ``mean_energy_j``), ``span_energy_j`` and
``iteration_energy_j``. Methods: ``busy-overlap``, ``fit``, ``overlap``, ``deltas``.
"""

import json

from perseus import _perseus


def attribute(trace, method="busy-overlap"):
    """Attributes ``trace`` with ``method``; raises perseus.PerseusError naming a malformed
    field or an unknown method."""
    return json.loads(_perseus._attribute(json.dumps(trace), str(method)))
