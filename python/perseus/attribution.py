"""Attributing a recorded reporting window again, offline (docs/measuring-energy.md).

``perseus.attribute(trace, method="busy-overlap", refresh_clock=True)`` takes a trace
(``opt.last_window_trace``, or the same dict loaded from a JSON file; layout in docs/formats.md)
and returns a dict: ``method`` (after any fallback), ``measured``, ``intervals`` (counter
intervals fitted), ``residual_rms_j`` (their residuals' root mean square, fit and busy-overlap),
``refresh_period_s`` and ``changes_on_clock`` (the counter's refresh clock and how many changes
were timed by it; 0 when the changes fit no clock), ``idle_power_w``, ``keys`` (per instruction
key: ``name``, ``mhz``, ``occurrences``, ``seconds``, ``power_w``, ``power_stderr_w`` (None when
unknown), ``pooling_stderr_w`` (busy-overlap, a key sharing its busy power with others: how far
its own power may lie from the shared one; where the counter cannot bound the split at all,
the farthest it may lie given only what the keys sharing it spent) and ``mean_energy_j``), ``span_energy_j`` and
``iteration_energy_j``. Methods: ``busy-overlap``, ``fit``, ``overlap``, ``deltas``.
``refresh_clock=False`` keeps every change at the time its reads give, even when the changes fit
a refresh clock.
"""

import json

from perseus import _perseus


def attribute(trace, method="busy-overlap", refresh_clock=True):
    """Attributes ``trace`` with ``method``; raises perseus.PerseusError naming a malformed
    field or an unknown method."""
    return json.loads(_perseus._attribute(json.dumps(trace), str(method), bool(refresh_clock)))
