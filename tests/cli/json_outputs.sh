#!/usr/bin/env bash
# --json on plan, plan evaluate, emulate, simulate-training and profile check (issue 52.6): each
# prints one JSON object and nothing else, with the field names docs/formats.md lists, and the
# numbers agree with what the same command writes or prints without it, and with the other
# commands (plan's "within +2%" is what plan export --max-slowdown 2% picks).
# Usage: bash json_outputs.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'jobs -p | xargs -r kill 2> /dev/null || true; rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
cd "$tmp"

"$perseus" profile synth --gpu a100 --stages 4 --out p.csv > /dev/null
"$perseus" profile check --profile p.csv --json > check.json
"$perseus" plan --profile p.csv --microbatches 6 --blocking-power 83.64 --out-dir F --json \
  > plan.json
"$perseus" plan export --frontier F --max-slowdown 2% --out-dir plans > export.txt
"$perseus" plan evaluate --profile p.csv --plan plans/plan_*.json --json > evaluate.json
"$perseus" plan evaluate --profile p.csv --plan plans/plan_*.json > evaluate.txt
"$perseus" emulate --profile p.csv --frontier F --max-slowdown 2% --json > emulate.json
"$perseus" serve --port 0 --store s.sqlite --scheduler all-max > serve.log 2>&1 &
for _ in $(seq 100); do grep -q "^listening on" serve.log && break; sleep 0.1; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' serve.log | head -1)
[[ -n $url ]] || fail "perseus serve did not start: $(cat serve.log)"
"$perseus" simulate-training --server "$url" --profile p.csv --microbatches 6 \
  --blocking-power 83.64 --iterations 6 --report-every 3 --out run.json --json > simulate.json
kill %1 2> /dev/null || true

/usr/bin/python3 - << 'PY' || fail "a --json summary is wrong (above)"
import json, re
load = lambda name: json.load(open(name))  # each file is one JSON object, nothing else
check, plan, evaluate, emulate, simulate = map(load, ["check.json", "plan.json",
                                                       "evaluate.json", "emulate.json",
                                                       "simulate.json"])
shape = check["profile_shape"]
assert check["valid"] and shape["stages"] == 4, check
assert shape["instructions"] == ["forward", "backward"] and shape["clock_mhz"] == [855, 1410]
assert shape["uneven_clocks"] is None and shape["measurement_error"] == [], shape
assert plan["profile_shape"] == shape, (plan["profile_shape"], shape)
assert (plan["schedule"], plan["microbatches"], plan["out_dir"]) == ("1f1b", 6, "F"), plan
rows = open("F/frontier.csv").read().splitlines()
assert plan["plans"] == len(rows) - 1 and 0 < plan["pareto_plans"] <= plan["plans"], plan
names = [row["name"] for row in plan["summary"]]
assert names[0] == "fastest" and names[-1] == "least energy" and "within +2%" in names, names
within2 = plan["summary"][names.index("within +2%")]
exported = int(re.search(r"plan (\d+):", open("export.txt").read()).group(1))
assert within2["index"] == exported, (within2, exported)
assert 0 < within2["slowdown"] <= 0.02 and within2["saving"] > 0, within2
assert abs(evaluate["time_s"] - within2["time_s"]) < 1e-6 * within2["time_s"], evaluate
text = dict(line.split() for line in open("evaluate.txt"))
assert set(text) == set(evaluate), (text, evaluate)
for key, value in evaluate.items():
    assert abs(float(text[key]) - value) <= 1e-3 * max(1, abs(value)), (key, text[key], value)
assert abs(evaluate["energy_saving_percent"] - 100 * within2["saving"]) < 1e-6, evaluate
assert evaluate["all_max_energy_j"] == plan["all_max"]["energy_j"], (evaluate, plan["all_max"])
assert abs(emulate["time_s"] - within2["time_s"]) < 1e-6 * within2["time_s"], emulate
assert len(emulate["gpus"]) == 4 and emulate["stages"] == 4, emulate
assert abs(sum(g["energy_j"] for g in emulate["gpus"]) - emulate["energy_j"]) < 1e-6 * emulate["energy_j"]
run = load("run.json")
assert simulate["iterations"] == len(run["iterations"]) == 6, simulate
del run["iterations"], simulate["iterations"]
assert simulate == run, (simulate, run)
assert simulate["gpus"] == "simulated" and simulate["finished"], simulate
PY
echo ok
