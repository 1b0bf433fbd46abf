"""The lines a run of the real-GPU harness (attribution_on_gpu.py) ends with: where the SM clock
was in each truth and window, each judged instruction's error against each truth with its clock
offset, and the acceptance counts. Reads the harness's attribution.json layout."""


def clock_text(clocks):
    if not clocks.get("samples"):
        return "-"
    return f"{clocks['sm_mhz']:.0f} MHz ({100 * clocks['power_capped']:.0f} % capped)"


def clock_lines(mb, result, orders):
    """Where the SM clock was (and how often the power cap held it) in each truth and each
    order's window: instructions that run at another clock than their truth draw another
    power."""
    lines = []
    for when in ("truth_before", "truth_after"):
        for truth, measured in result.get(when, {}).items():
            clocks = measured.get("clocks", {})
            lines.append(f"mb {mb} clocks {truth} truth {when[6:]}: " + ", ".join(
                f"{name} {clock_text(c)}" for name, c in clocks.items()))
    for order in orders:
        clocks = result.get(order, {}).get("clocks")
        if clocks:
            lines.append(f"mb {mb} clocks {order}: " + ", ".join(
                f"{name} {clock_text(c)}" for name, c in clocks.items()))
        client = result.get(order, {}).get("client_clocks")
        if client:  # what the client reported itself, from its sampler's readings
            lines.append(f"mb {mb} client clocks {order}: " + ", ".join(
                f"{name} {c['mean_mhz']:.0f} MHz ({100 * c['held_down_share']:.0f} % held down)"
                for name, c in client.items()))
    return lines


CLOCK_TOLERANCE_PCT = 1.0  # an instruction ran "at its truth's clock" within this much


def clock_offset_pct(result, order, name):
    """How far `name`'s mean SM clock in the order's window was from its packed truth's (the
    mean of before and after; a backward's is the pair truth's), in %; None without samples."""
    window = result.get(order, {}).get("clocks", {}).get(name, {})
    truths = [result.get(when, {}).get("packed", {}).get("clocks", {})
              .get("forward" if name == "forward" else "pair", {})
              for when in ("truth_before", "truth_after")]
    if not window.get("samples") or not all(t.get("samples") for t in truths):
        return None
    return 100.0 * (window["sm_mhz"] / (0.5 * sum(t["sm_mhz"] for t in truths)) - 1.0)


def summary(out, microbatches, orders, truths, method="busy-overlap", within_pct=5.0,
            from_s=0.010):
    """The acceptance lines: `method`'s error against each truth for every instruction of at
    least from_s (packed truth time) and how many are within within_pct; and the same count
    over the instructions that ran at their packed truth's SM clock (within
    CLOCK_TOLERANCE_PCT), since a truth describes an instruction only at its operating point.
    `microbatches`, `orders` and `truths` name what the run measured."""
    lines = []
    counts = {(t, same): [0, 0] for t in truths for same in (False, True)}
    for mb in microbatches:
        result = out.get(f"microbatch_{mb}")
        if result is None:
            continue
        lines += clock_lines(mb, result, orders)
        for name in ("forward", "backward"):
            seconds = result["truth"][f"{name}_s"]
            for order in orders:
                row = result.get(order, {}).get(method)
                if row is None:
                    lines.append(f"mb {mb} {name:8s} {order:13s} not measured")
                    continue
                errs = {t: row[name][f"{t}_error_pct"] for t in truths}
                off = clock_offset_pct(result, order, name)
                same_clock = off is not None and abs(off) <= CLOCK_TOLERANCE_PCT
                judged_here = seconds >= from_s
                for t, e in errs.items():
                    for same in (False, True) if same_clock else (False,):
                        counts[t, same][0] += judged_here and abs(e) <= within_pct
                        counts[t, same][1] += judged_here
                note = "" if judged_here else f"  (under {1e3 * from_s:.0f} ms: not judged)"
                clock = "" if off is None else f"  clock {off:+.1f} % off the truth's"
                lines.append(f"mb {mb} {name:8s} {1e3 * seconds:5.1f} ms {order:13s} " +
                             " ".join(f"{t} {e:+5.1f} %" for t, e in errs.items()) +
                             clock + note)
    for t in truths:
        (ok, n), (ok_same, n_same) = counts[t, False], counts[t, True]
        lines.append(f"{method} against the {t} truth: {ok} of {n} instructions of "
                     f">= {1e3 * from_s:.0f} ms within {within_pct:.0f} %; of those at the "
                     f"truth's SM clock (within {CLOCK_TOLERANCE_PCT:.0f} %): {ok_same} of "
                     f"{n_same}")
    return "\n".join(lines)
