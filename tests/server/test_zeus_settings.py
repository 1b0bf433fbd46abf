"""Zeus's server configuration as a user meets it: the default scheduler from Zeus's environment
variables (ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS), and a bad default that stops the server
at start with the reason. Zeus's own client against the README's serve command is
python/tests/test_zeus_client.py (the zeus package, in the project virtual environment)."""
import json
import os
import subprocess

import pytest

from conftest import PERSEUS, Server



def zeus_schedule_shape(body, rank):
    """What Zeus's FrequencySchedule(rank: int >= 0, frequencies: list[tuple[str, int]]) needs."""
    assert set(body) >= {"rank", "frequencies"}, body
    assert body["rank"] == rank
    for pair in body["frequencies"]:
        assert isinstance(pair, list) and len(pair) == 2
        assert isinstance(pair[0], str) and isinstance(pair[1], int) and not isinstance(pair[1], bool)
    return [tuple(pair) for pair in body["frequencies"]]


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
