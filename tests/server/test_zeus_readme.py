"""Zeus interoperability as a user meets it (issue 13): the README's own `perseus serve` command,
with a plan file in Zeus's format exported by `perseus plan export --format zeus`, serves an
unmodified Zeus client's exact sequence for a 4-rank job: register the job with `job_id: ""`,
register every rank, fetch schedules, post results, post again after `done`, and repeat a result
without `round`. Every answer has the shape Zeus's pydantic models parse."""
import ast
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import PERSEUS, Server

README = Path(__file__).resolve().parents[2] / "README.md"
STAGES, MICROBATCHES = 4, 8


def readme_serve_command():
    """The README's `perseus serve ...` command (continuation lines joined, `&` dropped)."""
    text = README.read_text()
    match = re.search(r"^perseus serve .*?(?<!\\)$", text, flags=re.M | re.S)
    assert match, "the README has no `perseus serve` command"
    command = match.group(0).replace("\\\n", " ").rstrip(" &")
    return shlex.split(command)


def zeus_schedule_shape(body, rank):
    """What Zeus's FrequencySchedule(rank: int >= 0, frequencies: list[tuple[str, int]]) needs."""
    assert set(body) >= {"rank", "frequencies"}, body
    assert body["rank"] == rank
    for pair in body["frequencies"]:
        assert isinstance(pair, list) and len(pair) == 2
        assert isinstance(pair[0], str) and isinstance(pair[1], int) and not isinstance(pair[1], bool)
    return [tuple(pair) for pair in body["frequencies"]]


@pytest.fixture
def readme_server(tmp_path):
    """The README's Usage commands that make the plan, then its serve command (port 0)."""
    run = lambda *args: subprocess.run([PERSEUS, *args], cwd=tmp_path, check=True,
                                       capture_output=True, text=True)
    run("profile", "synth", "--gpu", "a100", "--stages", str(STAGES), "--out", "profile.csv")
    run("plan", "--profile", "profile.csv", "--microbatches", str(MICROBATCHES),
        "--blocking-power", "83.64", "--out-dir", "frontier", "--quiet")
    run("plan", "export", "--frontier", "frontier", "--fastest", "--format", "zeus",
        "--out-dir", "plans")
    argv = readme_serve_command()
    assert argv[:2] == ["perseus", "serve"]
    port = argv.index("--port")
    argv[port + 1] = "0"  # any free port: tests run in parallel
    server = Server(tmp_path, argv=[PERSEUS, *argv[1:]])
    yield server, tmp_path
    server.kill()


def test_readme_serve_command_runs_an_unmodified_zeus_client(readme_server):
    server, workdir = readme_server
    (plan_file,) = (workdir / "plans").glob("freqs_pipeline_*.py")
    expected = [[tuple(pair) for pair in stage]
                for stage in ast.literal_eval(plan_file.read_text())]  # Zeus eval()s this file
    clocks = sorted({mhz for stage in expected for _, mhz in stage} | {1410}, reverse=True)

    # JobInfo(...).dict() of Zeus's client: every field, job_id "", job_metadata None.
    status, job_id = server.post("/register_job", {
        "job_id": "", "pp_degree": STAGES, "dp_degree": 1, "tp_degree": 1,
        "world_size": STAGES, "job_metadata": None})
    assert status == 200 and isinstance(job_id, str) and "+PointSolution" in job_id, job_id
    for rank in range(STAGES):
        body = {"rank": rank, "dp_rank": 0, "pp_rank": rank, "tp_rank": 0,
                "available_frequencies": clocks}
        assert server.post(f"/register_rank/{job_id}", body) == (200, None)

    answers = server.schedules(job_id, range(STAGES))
    for rank, (status, body) in answers.items():
        assert status == 200, body
        assert zeus_schedule_shape(body, rank) == expected[rank]
        assert body["done"] is True  # one plan: the final schedule

    def result(rank, pairs):  # ProfilingResult(...).dict(): two iterations, per instruction
        names = [name for name, _ in pairs]
        per = {name: [[0.05] * names.count(name)] * 2 for name in set(names)}
        return {"rank": rank, "iter_time": [1.5, 1.5], "iter_energy": [900.0, 901.0],
                "time_breakdown": per, "energy_breakdown": per}

    for rank in range(STAGES):
        body = result(rank, expected[rank])
        assert server.post(f"/result/{job_id}", body) == (200, None)  # after `done`
        assert server.post(f"/result/{job_id}", body) == (200, None)  # a retry, no `round`
    # The next windows: the same final schedule, and results acknowledged again.
    for rank, (status, body) in server.schedules(job_id, range(STAGES)).items():
        assert status == 200 and zeus_schedule_shape(body, rank) == expected[rank]
        assert server.post(f"/result/{job_id}", result(rank, expected[rank])) == (200, None)
    status, job = server.get(f"/jobs/{job_id}")
    assert status == 200 and job["state"] == "done", job


def test_zeus_environment_gives_the_default_scheduler(tmp_path):
    plan = tmp_path / "plan.py"
    plan.write_text('[[("forward", 1410), ("backward", 1395)],\n'
                    ' [("forward", 1380), ("backward", 1380)]]\n')
    env = {"ZEUS_PFO_SCHEDULER": "PointSolution",
           "ZEUS_PFO_SCHEDULER_ARGS": json.dumps({"solution_path": str(plan)})}
    server = Server(tmp_path, argv=[PERSEUS, "serve", "--port", "0", "--store",
                                    str(tmp_path / "s.sqlite"), "--data-dir", str(tmp_path)],
                    env=env)
    try:
        job_id = server.register_job(pp=2)
        server.register_ranks(job_id, pp=2)
        answers = server.schedules(job_id, [0, 1])
        assert zeus_schedule_shape(answers[1][1], 1) == [("forward", 1380), ("backward", 1380)]
    finally:
        server.kill()


@pytest.mark.parametrize("how, args, reason", [
    ("flags", ["--scheduler", "frontier", "--scheduler-args", '{"frontier": "nope"}'],
     "scheduler 'frontier': field 'frontier'"),
    ("flags", ["--scheduler", "all-max", "--scheduler-args", '{"microbatches": 0}'],
     "scheduler 'all-max': field 'microbatches': must be an integer >= 1"),
    ("flags", ["--scheduler", "all-max", "--scheduler-args", '{"microbatches": 2, "typo": 1}'],
     "'typo'"),
    ("env", {"ZEUS_PFO_SCHEDULER": "PointSolution",
             "ZEUS_PFO_SCHEDULER_ARGS": '{"solution_path": "missing.py"}'},
     "field 'solution_path': names no file or directory"),
    ("flags", ["--scheduler", "bogus"], "unknown scheduler 'bogus' (expected one of"),
])
def test_bad_default_scheduler_stops_the_server_at_start(tmp_path, how, args, reason):
    argv = [PERSEUS, "serve", "--port", "0", "--store", str(tmp_path / "s.sqlite"),
            "--data-dir", str(tmp_path)]
    env = None
    if how == "flags":
        argv += args
    else:
        env = args
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=30,
                          env=None if env is None else {**os.environ, **env})
    assert proc.returncode == 1, proc
    assert proc.stdout == ""  # never listened
    errors = [line for line in proc.stderr.splitlines() if line.startswith("perseus: error:")]
    assert len(errors) == 1 and reason in errors[0], proc.stderr
