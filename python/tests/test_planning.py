"""Planning from Python (issue 52.3): perseus.plan on a published profile gives the CLI's frontier,
the CLI's choices and the CLI's plan files, byte for byte, because both run the same C++ code."""

import csv
import json
import os
import subprocess

import pytest

import perseus

SHARED = os.environ.get("PERSEUS_SHARED_DATA",
                        os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                     "data"))
GPT3 = os.path.join(SHARED, "perseus", "stage_profiles", "gpt3-175b+a100_sxm_bf16.csv")


@pytest.fixture(scope="module")
def published(perseus_bin, tmp_path_factory):
    """GPT-3 175B on A100 (published, 8 stages), 12 microbatches, 83.64 W: planned by the CLI
    into a directory, and by perseus.plan."""
    if not os.path.isfile(GPT3):
        pytest.skip(f"no published profile at {GPT3}")
    out = tmp_path_factory.mktemp("cli")
    subprocess.run([perseus_bin, "plan", "--profile", GPT3, "--microbatches", "12",
                    "--blocking-power", "83.64", "--out-dir", str(out / "F"), "--quiet"],
                   check=True, capture_output=True, text=True)
    frontier = perseus.plan(perseus.read_profile(GPT3), microbatches=12, blocking_power=83.64)
    return out, frontier


def assert_same_numbers(mine, theirs, where="plan"):
    """Equal JSON values, floats to the 10 significant digits a frontier directory keeps."""
    assert type(mine) is type(theirs), where
    if isinstance(mine, dict):
        assert mine.keys() == theirs.keys(), where
        for key in mine:
            assert_same_numbers(mine[key], theirs[key], f"{where}.{key}")
    elif isinstance(mine, list):
        assert len(mine) == len(theirs), where
        for i, (a, b) in enumerate(zip(mine, theirs)):
            assert_same_numbers(a, b, f"{where}[{i}]")
    elif isinstance(mine, float):
        assert mine == pytest.approx(theirs, rel=1e-9), where
    else:
        assert mine == theirs, where


def cli_rows(directory):
    with open(directory / "frontier.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_the_frontier_is_the_clis(published):
    out, frontier = published
    rows = cli_rows(out / "F")
    assert len(frontier) == len(rows) > 100
    for plan, row in zip(frontier, rows):
        assert plan.index == int(row["index"])
        assert plan.time_s == pytest.approx(float(row["evaluated_time_s"]), rel=1e-9)
        assert plan.energy_j == pytest.approx(float(row["evaluated_energy_j"]), rel=1e-9)
    meta = json.loads((out / "F" / "meta.json").read_text())
    assert frontier.all_max == pytest.approx((meta["all_max"]["time_s"],
                                              meta["all_max"]["energy_j"]), rel=1e-9)
    assert (frontier.schedule, frontier.num_stages, frontier.num_microbatches) == ("1f1b", 8, 12)
    pareto = frontier.pareto
    assert pareto[0] == frontier.fastest() and pareto[-1] == frontier.min_energy()
    assert all(a.time_s < b.time_s and a.energy_j > b.energy_j for a, b in zip(pareto, pareto[1:]))
    assert frontier.fastest().saving > 0.05, frontier.fastest()  # the published saving
    assert "Frontier(" in repr(frontier) and str(frontier.fastest()).startswith("plan ")


@pytest.mark.parametrize("choice, args", [
    (lambda f: f.max_slowdown("2%"), ["--max-slowdown", "2%"]),
    (lambda f: f.max_slowdown(5), ["--max-slowdown", "5"]),
    (lambda f: f.fastest(), ["--fastest"]),
    (lambda f: f.min_energy(), ["--min-energy"]),
    (lambda f: f[17], ["--index", "17"]),
])
def test_choices_and_plan_files_are_the_clis(published, perseus_bin, tmp_path, choice, args):
    out, frontier = published
    for fmt in ("json", "py", "zeus"):
        cli_dir, py_dir = tmp_path / f"cli-{fmt}", tmp_path / f"py-{fmt}"
        subprocess.run([perseus_bin, "plan", "export", "--frontier", str(out / "F"), *args,
                        "--format", fmt, "--out-dir", str(cli_dir)], check=True,
                       capture_output=True, text=True)
        (written,) = os.listdir(cli_dir)
        path = choice(frontier).export(py_dir, format=fmt)
        assert os.path.basename(path) == written
        mine, theirs = open(path).read(), (cli_dir / written).read_text()
        if fmt == "json":  # the CLI's frontier was read back from its 10-digit frontier.csv
            assert_same_numbers(json.loads(mine), json.loads(theirs))
        else:
            assert mine == theirs


def test_a_saved_frontier_is_what_the_cli_writes_and_reads(published, perseus_bin, tmp_path):
    out, frontier = published
    frontier.save(tmp_path / "F")
    assert cli_rows(tmp_path / "F") == cli_rows(out / "F")
    assert (tmp_path / "F" / "plans.txt").read_text() == (out / "F" / "plans.txt").read_text()
    again = perseus.load_frontier(tmp_path / "F")
    assert [p.index for p in again.pareto] == [p.index for p in frontier.pareto]
    export = subprocess.run([perseus_bin, "plan", "export", "--frontier", str(tmp_path / "F"),
                             "--max-slowdown", "2%", "--out-dir", str(tmp_path / "plans")],
                            capture_output=True, text=True)
    assert export.returncode == 0, export.stderr
    assert f"plan_{frontier.max_slowdown('2%').index:05d}.json" in os.listdir(tmp_path / "plans")
    with pytest.raises(perseus.PerseusError, match="read from a directory"):
        again.save(tmp_path / "G")


def test_frequencies_run_every_instruction_of_the_schedule(published):
    _, frontier = published
    plan = frontier.fastest()
    clocks = plan.frequencies
    assert len(clocks) == 8 and all(len(rank) == 2 * 12 for rank in clocks)
    assert all(855 <= mhz <= 1410 for rank in clocks for mhz in rank)
    assert frontier.all_max[0] <= plan.time_s  # at most as fast as every GPU at its top clock


def test_evaluate_is_plan_evaluate(published, perseus_bin, tmp_path):
    """perseus.evaluate of an exported plan equals `perseus plan evaluate --json` of it; a Zeus
    file (no blocking power in it) evaluates the same clocks the same with it given."""
    _, frontier = published
    chosen = frontier.max_slowdown("2%")
    path = chosen.export(tmp_path / "json")
    cli = subprocess.run([perseus_bin, "plan", "evaluate", "--profile", GPT3, "--plan", path,
                          "--json"], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    theirs = json.loads(cli.stdout)
    mine = perseus.evaluate(GPT3, path)
    assert (mine.time_s, mine.energy_j) == (theirs["time_s"], theirs["energy_j"])
    assert mine.all_max == (theirs["all_max_time_s"], theirs["all_max_energy_j"])
    assert 100 * mine.saving == pytest.approx(theirs["energy_saving_percent"], rel=1e-12)
    assert 100 * mine.slowdown == pytest.approx(theirs["slowdown_percent"], rel=1e-12)
    assert (mine.schedule, mine.num_stages, mine.num_microbatches) == ("1f1b", 8, 12)
    assert mine.blocking_power == 83.64 and mine.saving_stderr is None
    assert mine.frequencies == chosen.frequencies
    assert mine.time_s == pytest.approx(chosen.time_s, rel=1e-9)
    assert str(mine) == f"{path}: 2.892441 s, 5990.48 J; +1.97 % time, -18.37 % energy vs all-max"
    zeus = chosen.export(tmp_path / "zeus", format="zeus")
    with pytest.raises(perseus.PerseusError, match="blocking_power is required"):
        perseus.evaluate(GPT3, zeus)
    again = perseus.evaluate(perseus.read_profile(GPT3), zeus, blocking_power=83.64)
    assert (again.time_s, again.energy_j, again.num_microbatches) == (
        mine.time_s, mine.energy_j, 12)
    with pytest.raises(perseus.PerseusError, match="12 microbatches, not 8"):
        perseus.evaluate(GPT3, path, microbatches=8)
    with pytest.raises(perseus.PerseusError, match="plan_.*json.*gpipe|gpipe.*plan_"):
        perseus.evaluate(GPT3, path, schedule="gpipe")


def test_bad_inputs_say_what_is_wrong(published, tmp_path):
    _, frontier = published
    with pytest.raises(perseus.PerseusError, match="0.05.*%"):
        frontier.max_slowdown(0.05)  # ambiguous: 0.05 % or 5 %?
    with pytest.raises(perseus.PerseusError, match="within"):
        frontier.within_time(frontier.fastest().time_s / 2)
    with pytest.raises(perseus.PerseusError, match="index"):
        frontier[len(frontier) + 5]
    with pytest.raises(perseus.PerseusError, match="expected json, py or zeus"):
        frontier.fastest().export(tmp_path, format="yaml")
    with pytest.raises(perseus.PerseusError, match="microbatches"):
        perseus.plan(GPT3, microbatches=0, blocking_power=83.64)
    with pytest.raises(perseus.PerseusError, match="allow_implausible=True"):
        perseus.plan(GPT3, microbatches=4, blocking_power=0.08)  # kW, not W
    with pytest.raises(perseus.PerseusError, match="schedule"):
        perseus.plan(GPT3, microbatches=4, blocking_power=83.64, schedule="1f2b")
    missing = tmp_path / "missing.csv"
    with pytest.raises(perseus.PerseusError, match="missing.csv"):
        perseus.read_profile(missing)


def test_other_schedules_plan_too(profile2):
    profile = perseus.read_profile(profile2)
    assert profile.num_stages == 2 and profile.instructions(0) == ["forward", "backward"]
    assert max(profile.clocks(0, "forward")) == 1410
    for schedule in ("gpipe", "envelope"):
        frontier = perseus.plan(profile, microbatches=4, blocking_power=83.64,
                                schedule=schedule)
        assert frontier.schedule.startswith(schedule), frontier.schedule
        assert frontier.fastest().time_s <= frontier.min_energy().time_s


def test_to_pandas(published):
    pandas = pytest.importorskip("pandas")
    _, frontier = published
    table = frontier.to_pandas()
    assert isinstance(table, pandas.DataFrame) and len(table) == len(frontier)
    assert table.loc[frontier.fastest().index, "saving"] == frontier.fastest().saving
    assert table["pareto"].sum() == len(frontier.pareto)


def test_plot(published, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    _, frontier = published
    chosen = frontier.max_slowdown("2%")
    ax = frontier.plot(chosen=chosen)
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == [
        "Perseus frontier", "all-max", f"plan {chosen.index}"]
    assert list(lines[0].get_xdata()) == [p.time_s for p in frontier.pareto]
    assert list(lines[0].get_ydata()) == [p.energy_j for p in frontier.pareto]
    assert (lines[1].get_xdata()[0], lines[1].get_ydata()[0]) == frontier.all_max
    assert (lines[2].get_xdata()[0], lines[2].get_ydata()[0]) == (chosen.time_s, chosen.energy_j)
    picture = tmp_path / "frontier.png"
    ax.figure.savefig(picture)
    assert picture.read_bytes().startswith(b"\x89PNG")
