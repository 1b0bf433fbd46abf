"""Zeus interoperability with Zeus's own client: the `perseus serve` command of docs/usage.md,
serving a plan exported in Zeus's format (`perseus plan export --format zeus`), runs the unmodified
`zeus.optimizer.pipeline_frequency.PipelineFrequencyOptimizer` of the zeus package (0.16, PyPI) on
4 gloo processes (workers/zeus_ranks.py): registration, the job id broadcast, the schedule
barrier, Zeus's name-by-name instruction checks over several iterations, and the clocks its
separate clock process locks through NVML (the fake libnvidia-ml, the only stand-in: no GPU
here) are each rank's plan, in order."""

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from server_support import serve

pytest.importorskip("zeus.optimizer.pipeline_frequency")

HERE = Path(__file__).resolve().parent
GUIDE = HERE.parents[1] / "docs" / "usage.md"
STAGES, MICROBATCHES, ITERATIONS = 4, 8, 3


def readme_serve_command():
    """The guide's `perseus serve ...` command (continuation lines joined, `&` dropped)."""
    text = GUIDE.read_text()
    match = re.search(r"^perseus serve .*?(?<!\\)$", text, flags=re.M | re.S)
    assert match, "the guide (docs/usage.md) has no `perseus serve` command"
    return shlex.split(match.group(0).replace("\\\n", " ").rstrip(" &"))


@pytest.fixture
def readme_server(perseus_bin, tmp_path):
    """The guide's Usage commands that make the plan, then its serve command (port 0)."""
    def run(*args):
        subprocess.run([perseus_bin, *args], cwd=tmp_path, check=True, capture_output=True)
    run("profile", "synth", "--gpu", "a100", "--stages", str(STAGES), "--out", "profile.csv")
    run("plan", "--profile", "profile.csv", "--microbatches", str(MICROBATCHES),
        "--blocking-power", "83.64", "--out-dir", "frontier", "--quiet")
    run("plan", "export", "--frontier", "frontier", "--fastest", "--format", "zeus",
        "--out-dir", "plans")
    argv = readme_serve_command()
    assert argv[:2] == ["perseus", "serve"]
    argv[argv.index("--port") + 1] = "0"  # any free port: tests run in parallel
    for url in serve(perseus_bin, tmp_path, argv=[perseus_bin, *argv[1:]]):
        yield url, tmp_path


def locked_clocks(log):
    """The SM clocks a rank's NVML calls locked, in order."""
    return [int(line.split()[1]) for line in log.read_text().splitlines()
            if line.startswith("nvmlDeviceSetGpuLockedClocks")]


def test_zeus_own_client_follows_the_plan_perseus_serves(readme_server, tmp_path):
    url, workdir = readme_server
    (plan_file,) = (workdir / "plans").glob("freqs_pipeline_*.py")
    plan = ast.literal_eval(plan_file.read_text())  # Zeus's server eval()s this file
    fake = os.environ.get("PERSEUS_FAKE_NVML")
    if not fake:
        pytest.skip("no fake libnvidia-ml: set PERSEUS_FAKE_NVML (CTest does)")
    out = tmp_path / "zeus"
    out.mkdir()
    env = {**os.environ, "LD_LIBRARY_PATH": os.path.dirname(fake),
           "FAKE_NVML_DEVICES": str(STAGES), "FAKE_NVML_CLOCKS": "1410:855:15"}  # an A100's
    res = subprocess.run([sys.executable, str(HERE / "workers" / "zeus_ranks.py"), url,
                          str(STAGES), str(ITERATIONS), str(out)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = set()
    for rank in range(STAGES):
        result = json.loads((out / f"rank{rank}.json").read_text())
        jobs.add(result["job_id"])
        planned = [tuple(pair) for pair in plan[rank]]
        assert [tuple(pair) for pair in result["schedule"]] == planned
        assert result["controller_exit"] == 0
        # Zeus's clock process: the highest clock first, then every change the plan makes over
        # the iterations (it skips a clock equal to the current one).
        wanted, current = [1410], 1410
        for _ in range(ITERATIONS):
            for _, mhz in planned:
                if mhz != current:
                    wanted.append(mhz)
                    current = mhz
        assert locked_clocks(out / f"nvml{rank}.log") == wanted, rank
    assert len(jobs) == 1 and "+PointSolution+zeus" in jobs.pop()
