"""Planning from Python: the same planner, choices and plan files as ``perseus plan`` and
``perseus plan export`` (the C++ library does the work; this module only shapes it)::

    import perseus
    profile = perseus.read_profile("profile.csv")
    frontier = perseus.plan(profile, microbatches=8, blocking_power=83.64)
    chosen = frontier.max_slowdown("2%")      # or fastest(), min_energy(), frontier[index]
    print(chosen)                             # plan 346: 2.836500 s, ...; -14.20 % energy
    chosen.export("plans/")                   # plans/plan_00346.json; format="zeus" or "py"
    frontier.save("frontier/")                # what `perseus plan --out-dir` writes
    frontier.to_pandas()                      # where pandas is installed
    frontier.plot()                           # where matplotlib is installed
    perseus.evaluate(profile, "plans/plan_00346.json")   # as `perseus plan evaluate`

Errors (a bad profile, a schedule the profile does not cover, no plan within a slowdown) raise
:class:`perseus.PerseusError` with the CLI's message.
"""

import os
from dataclasses import dataclass

from perseus import _perseus

__all__ = ["Evaluation", "Frontier", "Plan", "Profile", "evaluate", "load_frontier", "plan",
           "read_profile"]


class Profile:
    """A stage profile CSV (``stage,instruction,frequency,time,energy``), read and checked."""

    def __init__(self, native):
        self._native = native

    @property
    def num_stages(self):
        return self._native.num_stages

    @property
    def source(self):
        """The file it was read from."""
        return self._native.source

    def instructions(self, stage):
        """The instruction types profiled for ``stage`` (e.g. ``["forward", "backward"]``)."""
        return self._native.instructions(stage)

    def clocks(self, stage, instruction):
        """The SM clocks (MHz) profiled for one (stage, instruction), in file order."""
        return self._native.clocks(stage, instruction)

    def __repr__(self):
        return f"Profile({self.source!r}, {self.num_stages} stages)"


def read_profile(path, allow_implausible=False):
    """Reads and validates a profile CSV, and checks it is plausible for one GPU (power per row
    5..2000 W, clocks 50..5000 MHz) unless ``allow_implausible``."""
    return Profile(_perseus._read_profile(os.fspath(path), allow_implausible))


@dataclass(frozen=True)
class Plan:
    """One row of a frontier: its clocks were evaluated against the profile (``time_s``,
    ``energy_j``); ``slowdown`` and ``saving`` are fractions against all-max (0.05 = 5 %)."""

    frontier: "Frontier"
    index: int
    time_s: float
    energy_j: float
    slowdown: float
    saving: float
    pareto: bool

    @property
    def frequencies(self):
        """The SM clock (MHz) of every instruction, per GPU of the pipeline in its action
        order."""
        return self.frontier._native.frequencies(self.index)

    def export(self, directory, format="json"):
        """Writes the plan into ``directory`` (created if needed) as ``perseus plan export``
        does: ``json`` (plan_NNNNN.json), ``py`` (the reference optimizer's list of clocks) or
        ``zeus`` (Zeus's (instruction, clock) pairs, for its point-solution scheduler). Returns
        the file's path."""
        return self.frontier._native.write_plan_file(self.index, format, os.fspath(directory))

    def __str__(self):
        return self.frontier._native.describe(self.index)


class Frontier:
    """The iteration time-energy frontier of a pipeline: every plan the planner found, the
    all-max reference, and the CLI's ways of choosing one (each among the Pareto rows, but
    ``frontier[index]``)."""

    def __init__(self, native):
        self._native = native
        self._plans = [Plan(self, index, evaluated_time, evaluated_energy,
                            native.slowdown(index), native.saving(index), pareto)
                       for index, _planned_time, _predicted_energy, evaluated_time,
                       evaluated_energy, pareto in native.rows()]

    @property
    def all_max(self):
        """(time_s, energy_j) of one iteration with every instruction at the highest clock."""
        return self._native.all_max

    @property
    def schedule(self):
        return self._native.schedule

    @property
    def num_stages(self):
        return self._native.num_stages

    @property
    def num_microbatches(self):
        return self._native.num_microbatches

    @property
    def blocking_power(self):
        """Watts drawn while blocked on communication, as planned."""
        return self._native.blocking_power_w

    def __len__(self):
        return len(self._plans)

    def __iter__(self):
        return iter(self._plans)

    def __getitem__(self, index):
        """The plan with this row index (as ``plan export --index``; it may be dominated)."""
        return self._plans[self._native.select(index)]

    @property
    def pareto(self):
        """The Pareto-optimal plans, fastest first."""
        return [self._plans[i] for i in self._native.pareto()]

    def fastest(self):
        return self._plans[self._native.fastest()]

    def min_energy(self):
        return self._plans[self._native.min_energy()]

    def max_slowdown(self, slowdown):
        """The cheapest plan at most ``slowdown`` slower than all-max, written as the CLI's
        ``--max-slowdown``: ``"5%"`` or ``5`` (5 %); a bare number below 1 (``0.05``) is
        refused as ambiguous."""
        return self._plans[self._native.within_slowdown(str(slowdown))]

    def within_time(self, time_s):
        """The cheapest plan whose iteration takes at most ``time_s`` seconds."""
        return self._plans[self._native.within_time(float(time_s))]

    def save(self, directory):
        """Writes the frontier directory (frontier.csv, plans.txt, meta.json) that ``perseus
        plan --out-dir`` writes, so the CLI (``plan export``, ``emulate``, ``report``, the
        frontier scheduler) reads it."""
        self._native.save(os.fspath(directory))

    def to_pandas(self):
        """One row per plan: index, time_s, energy_j, slowdown, saving, pareto (needs pandas)."""
        import pandas  # noqa: PLC0415 (optional dependency)

        return pandas.DataFrame(
            [{"index": p.index, "time_s": p.time_s, "energy_j": p.energy_j,
              "slowdown": p.slowdown, "saving": p.saving, "pareto": p.pareto}
             for p in self._plans]).set_index("index")

    def plot(self, ax=None, chosen=None):
        """Draws the Pareto plans' iteration time against energy, all-max marked (and
        ``chosen``, a Plan, where given) on a matplotlib axes (a new figure's when None);
        returns the axes. Needs matplotlib."""
        import matplotlib.pyplot as plt  # noqa: PLC0415 (optional dependency)

        if ax is None:
            _figure, ax = plt.subplots()
        pareto = self.pareto
        ax.plot([p.time_s for p in pareto], [p.energy_j for p in pareto], ".-",
                label="Perseus frontier")
        ax.plot(*self.all_max, "s", label="all-max")
        if chosen is not None:
            ax.plot(chosen.time_s, chosen.energy_j, "*", markersize=12,
                    label=f"plan {chosen.index}")
        ax.set_xlabel("iteration time (s)")
        ax.set_ylabel("iteration energy (J)")
        ax.legend()
        return ax

    def __repr__(self):
        return (f"Frontier({len(self)} plans, {len(self.pareto)} Pareto, {self.schedule}, "
                f"{self.num_stages} stages, {self.num_microbatches} microbatches)")


def plan(profile, microbatches, blocking_power, schedule="1f1b", stages=None,
         virtual_stages=None, unit_time=0.001, threads=0, allow_implausible=False):
    """Computes the frontier of ``profile`` (a :class:`Profile` or a CSV path) run with
    ``microbatches`` per iteration on ``schedule`` (a name of ``perseus plan --schedule``:
    1f1b, gpipe, interleaved-1f1b, ..., envelope), blocking power in watts; as ``perseus plan``
    with the same options. ``stages`` defaults to the profile's, ``threads`` 0 to one per
    hardware thread (the frontier is the same for any number)."""
    if not isinstance(profile, Profile):
        profile = read_profile(profile, allow_implausible)
    return Frontier(_perseus._plan(profile._native, microbatches, blocking_power, schedule,
                                   stages or 0, virtual_stages or 0, unit_time, threads,
                                   allow_implausible))


@dataclass(frozen=True)
class Evaluation:
    """A plan file evaluated on a profile against all-max on the same schedule, as ``perseus
    plan evaluate`` prints it: ``time_s``, ``energy_j`` of one iteration, ``all_max`` (time_s,
    energy_j), ``saving`` and ``slowdown`` (fractions against all-max), and how far the saving
    may be off because the profile was measured (``saving_stderr``, ``saving_pooling_bound``:
    fractions, None where the profile has no error columns)."""

    path: str
    schedule: str
    num_stages: int
    num_microbatches: int
    blocking_power: float
    time_s: float
    energy_j: float
    all_max: tuple
    saving_stderr: float = None
    saving_pooling_bound: float = None
    frequencies: list = None

    @property
    def saving(self):
        return 1.0 - self.energy_j / self.all_max[1]

    @property
    def slowdown(self):
        return self.time_s / self.all_max[0] - 1.0

    def __str__(self):
        error = (f" +- {100 * self.saving_stderr:.2f}" if self.saving_stderr is not None else "")
        return (f"{self.path}: {self.time_s:.6f} s, {self.energy_j:.2f} J; "
                f"{100 * self.slowdown:+.2f} % time, {-100 * self.saving:+.2f}{error} % energy "
                f"vs all-max")


def evaluate(profile, plan_file, blocking_power=None, schedule=None, microbatches=None,
             virtual_stages=None, allow_implausible=False):
    """Evaluates a plan file (any format ``perseus plan export`` writes, or Zeus's) on ``profile``
    (a :class:`Profile` or a CSV path) against all-max, as ``perseus plan evaluate``. What the
    file says of its schedule wins; ``schedule``, ``microbatches`` and ``virtual_stages`` fill
    what it does not (and must agree with what it does). ``blocking_power`` (W) defaults to the
    one a plan JSON carries. Returns an :class:`Evaluation`."""
    if not isinstance(profile, Profile):
        profile = read_profile(profile, allow_implausible)
    result = _perseus._evaluate(profile._native, os.fspath(plan_file), blocking_power,
                                schedule or "", microbatches or 0, virtual_stages or 0,
                                allow_implausible)
    return Evaluation(path=os.fspath(plan_file), schedule=result["schedule"],
                      num_stages=result["num_stages"],
                      num_microbatches=result["num_microbatches"],
                      blocking_power=result["blocking_power_w"], time_s=result["time_s"],
                      energy_j=result["energy_j"], all_max=tuple(result["all_max"]),
                      saving_stderr=result["saving_stderr"],
                      saving_pooling_bound=result["saving_pooling_bound"],
                      frequencies=result["frequencies"])


def load_frontier(directory):
    """Reads a frontier directory that ``perseus plan`` (or :meth:`Frontier.save`) wrote."""
    return Frontier(_perseus._load_frontier(os.fspath(directory)))
