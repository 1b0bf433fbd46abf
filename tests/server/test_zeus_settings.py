"""Zeus's server configuration as a user meets it: the default scheduler from Zeus's environment
variables (ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS), and a bad default that stops the server
at start with the reason. Zeus's own client against the guide's serve command is
python/tests/test_zeus_client.py (the zeus package, in the project virtual environment)."""
import json
import os
import subprocess

import pytest

from conftest import PERSEUS, Server, result_body



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
    ("flags", ["--scheduler", "bogus"], "--scheduler: unknown scheduler 'bogus' (expected one of"),
    # 51.10: a bad default from Zeus's environment names the variable it came from.
    ("env", {"ZEUS_PFO_SCHEDULER": "Bogus"}, "ZEUS_PFO_SCHEDULER: unknown scheduler 'Bogus'"),
    ("env", {"ZEUS_PFO_SCHEDULER": "AllMaxFrequency", "ZEUS_PFO_SCHEDULER_ARGS": '{"x": 1}'},
     "default scheduler arguments (ZEUS_PFO_SCHEDULER_ARGS): scheduler 'all-max': field 'x'"),
    ("flags", ["--scheduler", "profiler", "--scheduler-args",
               '{"microbatches": 2, "minimum_power_state": 900, "min_frequency": 900}'],
     "field 'minimum_power_state': is Zeus's name for 'min_frequency': give one of them"),
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


def test_zeus_instruction_profiler_configuration_runs_unchanged(tmp_path):
    """51.10: Zeus's InstructionProfiler configuration, from Zeus's environment variables: its
    3D name, its argument names (warmup_step_ratio, minimum_power_state) and no microbatch
    count, which Zeus's Perseus JobInfo sends with the job (num_microbatches). The profiler
    sweeps the clocks down to minimum_power_state. (Before: "InstructionProfiler3D" unknown, the
    argument names refused, microbatches required.)"""
    env = {"ZEUS_PFO_SCHEDULER": "InstructionProfiler3D",
           "ZEUS_PFO_SCHEDULER_ARGS": json.dumps({"warmup_step_ratio": 0.1,
                                                  "minimum_power_state": 1395})}
    server = Server(tmp_path, argv=[PERSEUS, "serve", "--port", "0", "--store",
                                    str(tmp_path / "s.sqlite"), "--data-dir", str(tmp_path),
                                    "--output-dir", str(tmp_path / "out")], env=env)
    try:
        job_id = server.register_job(pp=2, framework="megatron", model_name="gpt3",
                                     partition_method="uniform", microbatch_size=1,
                                     num_microbatches=2)
        server.register_ranks(job_id, pp=2)
        clocks = []
        for round_ in range(4):
            answers = server.schedules(job_id, [0, 1], round_=round_)
            assert all(status == 200 for status, _ in answers.values()), answers
            pairs = zeus_schedule_shape(answers[0][1], 0)
            assert [name for name, _ in pairs] == ["forward", "forward", "backward", "backward"]
            clocks.append(pairs[0][1])
            if answers[0][1].get("done"):
                break
            for rank in (0, 1):
                names = [name for name, _ in zeus_schedule_shape(answers[rank][1], rank)]
                body = result_body(rank, names, iterations=10, round_=round_)
                assert server.post(f"/result/{job_id}", body)[0] == 200
        assert clocks[:2] == [1410, 1395], clocks  # swept down to minimum_power_state
    finally:
        server.kill()


@pytest.mark.parametrize("scheduler", ["zeus-global", "zeus-per-stage"])
def test_a_power_limit_scheduler_is_refused_to_a_client_that_only_locks_clocks(tmp_path,
                                                                               scheduler):
    """51.11: Zeus's client (its JobInfo, no applies_power_limits) would lock clocks only and
    never apply the limits these schedulers serve: its registration is refused, saying why and
    what to run instead; Perseus's client says it applies them and is served limits. (Before,
    Zeus's client ended "done" at a 200 W limit that was never applied.)"""
    server = Server(tmp_path, scheduler=scheduler,
                    scheduler_args={"microbatches": 2, "power_limits": [300, 200]})
    try:
        body = {"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2,
                "job_metadata": None}
        status, answer = server.post("/register_job", body)
        assert status == 422, answer
        assert f"'{scheduler}' sets GPU power limits" in answer["detail"], answer
        assert "run the job with Perseus's client" in answer["detail"], answer
        job_id = server.register_job(pp=2, applies_power_limits=True)
        server.register_ranks(job_id, pp=2)
        answers = server.schedules(job_id, [0, 1])
        assert all(answer["power_limit_w"] == 300 for _, answer in answers.values()), answers
    finally:
        server.kill()
