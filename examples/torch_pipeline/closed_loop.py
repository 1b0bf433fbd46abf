"""The whole Perseus loop on a real torch.distributed.pipelining job, in one command:

  1. start `perseus serve` (SQLite store, loopback, a free port);
  2. profile: train.py (4 CPU processes, Perseus attached, a paced simulated GPU per rank) under
     the instruction profiler, which sweeps the clock and writes the profile and blocking power;
  3. plan: `perseus plan --schedule-file` on the order the job registered (torch's own);
  4. run: the same training under all-max, the frontier's fastest plan and its least-energy plan;
  5. compare what each run measured with what the planner predicted, and write report.html.

    .venv/bin/python examples/torch_pipeline/closed_loop.py --out out/torch_loop

The simulated GPUs follow `perseus profile synth --gpu a100` (or --gpus-profile): the profiler
measures them through the real training processes, so the profile, the plans and the measured
savings come from real processes and real communication, not from Perseus's pipeline model.
Prints one line per step; summary.json holds the numbers.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train import find_perseus  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="out/torch_loop", help="output directory")
    p.add_argument("--schedule", default="1f1b", help="train.py's --schedule")
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--iterations", type=int, default=20, help="iterations of each measured run")
    p.add_argument("--time-scale", type=float, default=0.2,
                   help="wall seconds per simulated second (the CPU's own compute must be "
                        "shorter than a paced instruction)")
    p.add_argument("--min-frequency", type=int, default=0,
                   help="the lowest clock the profiler measures (0: the GPU's lowest)")
    p.add_argument("--gpus-profile", help="the simulated GPUs' profile (default: synthetic A100)")
    p.add_argument("--perseus", help="the perseus binary (default: $PERSEUS_BIN, PATH, build/)")
    p.add_argument("--train-args", default="", help="more train.py arguments (one string)")
    return p.parse_args(argv)


def start_server(perseus, out):
    log = open(os.path.join(out, "server.log"), "w")
    proc = subprocess.Popen([perseus, "serve", "--port", "0", "--store",
                             os.path.join(out, "store.sqlite"), "--output-dir", out,
                             "--data-dir", out], stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://[\d.]+:\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"error: the server did not start: {line.strip()}")
    return proc, m.group(1)


def train(args, perseus, url, name, scheduler, scheduler_args, *extra):
    """Runs train.py under `scheduler`; returns its per-rank results."""
    result_dir = os.path.join(args.out, name)
    os.makedirs(result_dir, exist_ok=True)
    cmd = [sys.executable, os.path.join(HERE, "train.py"), "--schedule", args.schedule,
           "--microbatches", str(args.microbatches), "--batch-size", str(2 * args.microbatches),
           "--server", url, "--perseus", perseus, "--pace", "--time-scale", str(args.time_scale),
           "--scheduler", scheduler, "--scheduler-args", json.dumps(scheduler_args),
           "--result-dir", result_dir, "--quiet", *args.train_args.split(), *extra]
    if args.gpus_profile:
        cmd += ["--profile", args.gpus_profile]
    res = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(result_dir, "train.log"), "w") as f:
        f.write(res.stdout + res.stderr)
    if res.returncode != 0:
        sys.exit(f"error: {name} run failed (log: {result_dir}/train.log):\n"
                 f"{res.stderr.strip()[-2000:]}")
    results = []
    for name_ in sorted(os.listdir(result_dir)):
        if name_.startswith("rank") and name_.endswith(".json"):
            with open(os.path.join(result_dir, name_)) as f:
                results.append(json.load(f))
    return results


def measured(results, skip=2):
    """(iteration time in simulated s, pipeline energy per iteration in J): the slowest rank's
    median time and the sum of every rank's median energy, over the measured iterations after
    `skip` (the first plan's warm-up)."""
    times, energy = [], 0.0
    for r in results:
        its = r["iterations"][skip:] or r["iterations"]
        times.append(statistics.median(t for t, _ in its))
        energy += statistics.median(e for _, e in its)
    return max(times), energy


def clocks_followed(results):
    """(instructions that ran at the clock the served plan gave them, instructions run under a
    plan) over every rank and iteration: the simulated GPU's record against the plan."""
    followed = total = 0
    for r in results:
        for it in r["clocks"]:
            if not it["planned"]:
                continue
            total += len(it["planned"])
            followed += sum(1 for p, ran in zip(it["planned"], it["ran"]) if list(p) == list(ran))
    return followed, total


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode())


def main(argv=None):
    args = parse_args(argv)
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    perseus = os.path.abspath(find_perseus(args))
    server, url = start_server(perseus, args.out)
    started = time.monotonic()
    try:
        print(f"server      {url} (store {args.out}/store.sqlite)", flush=True)
        print("1/4 profiling under the instruction profiler ...", flush=True)
        profiler_args = {"output": "profile.csv"}
        if args.min_frequency:
            profiler_args["min_frequency"] = args.min_frequency
        order = os.path.join(args.out, "order.csv")
        prof = train(args, perseus, url, "profile", "profiler", profiler_args, "--until-done",
                     "--iterations", "100000", "--write-schedule", order)
        job = prof[0]["job_id"]
        profile = os.path.join(args.out, job, "profile.csv")
        if not os.path.isfile(profile):
            error = get_json(f"{url}/jobs/{job}").get("error", "no reason given")
            sys.exit(f"error: the profiler wrote no profile: {error} (server log: "
                     f"{args.out}/server.log)")
        with open(profile + ".blocking_power") as f:
            blocking = float(f.read())
        with open(profile) as f:
            rows = sum(1 for _ in f) - 1
        print(f"    {rows} profile rows in {len(prof[0]['wall_s'])} iterations, blocking power "
              f"{blocking:.2f} W ({profile})", flush=True)

        print("2/4 planning the frontier for the order torch runs ...", flush=True)
        frontier = os.path.join(args.out, "frontier")
        plan = subprocess.run([perseus, "plan", "--profile", profile, "--schedule-file", order,
                               "--blocking-power", f"{blocking}", "--out-dir", frontier,
                               "--quiet"], capture_output=True, text=True)
        if plan.returncode != 0:
            sys.exit(f"error: perseus plan refused the measured profile: "
                     f"{plan.stderr.strip()}")

        print("3/4 training under all-max, the fastest plan and the least-energy plan ...",
              flush=True)
        iterations = ["--iterations", str(args.iterations)]
        runs = {"all-max": train(args, perseus, url, "all-max", "all-max", {}, *iterations)}
        predicted = {}
        for target in ("fastest", "min-energy"):
            runs[target] = train(args, perseus, url, target, "frontier",
                                 {"frontier": frontier, "target": target}, *iterations,
                                 "--record-clocks")
            status = get_json(f"{url}/jobs/{runs[target][0]['job_id']}")
            predicted[target] = status["scheduler_status"]
        base_t, base_e = measured(runs["all-max"])
        summary = {"job_profile": job, "blocking_power_w": blocking, "runs": {}}
        print(f"    {'run':<11} {'time (s)':>9} {'energy (J)':>11} {'slowdown':>9} "
              f"{'saving':>8} {'planned slowdown':>17} {'planned saving':>15}")
        for name, results in runs.items():
            t, e = measured(results)
            row = {"time_s": t, "energy_j": e, "slowdown_pct": 100 * (t / base_t - 1),
                   "saving_pct": 100 * (1 - e / base_e),
                   "mismatched_iterations": sum(r["mismatched_iterations"] for r in results)}
            plan = predicted.get(name)
            if plan:
                row["clocks_followed"], row["instructions_planned"] = clocks_followed(results)
                served = plan.get("served", plan)
                row["planned_slowdown_pct"] = 100 * served["slowdown"]
                row["planned_saving_pct"] = 100 * served["saving"]
            summary["runs"][name] = row
            planned = (f"{row['planned_slowdown_pct']:16.2f}% {row['planned_saving_pct']:14.2f}%"
                       if plan else f"{'':>17} {'':>15}")
            print(f"    {name:<11} {t:9.3f} {e:11.1f} {row['slowdown_pct']:8.2f}% "
                  f"{row['saving_pct']:7.2f}% {planned}", flush=True)
        for name, row in summary["runs"].items():
            if "clocks_followed" in row:
                print(f"    {name}: {row['clocks_followed']} of {row['instructions_planned']} "
                      "instructions ran at the clock the served plan gave them", flush=True)

        print("4/4 report ...", flush=True)
        report = os.path.join(args.out, "report.html")
        subprocess.run([perseus, "report", "--profile", profile, "--blocking-power",
                        f"{blocking}", "--frontier", frontier, "--out", report], check=True,
                       capture_output=True)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        print(f"done in {time.monotonic() - started:.0f} s: {report}, "
              f"{args.out}/summary.json", flush=True)
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
