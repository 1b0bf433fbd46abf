#!/usr/bin/env bash
# The online Zeus baselines on a running job: perseus simulate-training (one client process per
# rank, simulated GPUs under power limits) runs until the scheduler has swept its limits and
# settled; the final schedule sets power limits (one for all stages, or one per stage), and the
# settled job is cheaper than the sweep's first, highest-limit round. zeus-per-stage is given no
# "microbatches": simulate-training fills in its own instruction order.
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
server_pid=
trap 'kill $server_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

start_server 0

limits='"power_limits": {"max_w": 450, "min_w": 250, "step_w": 50}, "eta": 0.5'
for scheduler in zeus-global zeus-per-stage; do
  args="{\"microbatches\": 4, $limits}"
  [[ $scheduler == zeus-per-stage ]] && args="{$limits}"
  "$perseus" simulate-training --server "$url" --stages 4 --microbatches 4 --blocking-power 83.64 \
    --until-done --quiet --out "$tmp/$scheduler.json" --scheduler "$scheduler" \
    --scheduler-args "$args" || fail "$scheduler run failed"
  /usr/bin/python3 - "$url" "$tmp/$scheduler.json" "$scheduler" <<'PY' || fail "$scheduler check"
import json, sys, urllib.request
url, run, name = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
job = json.load(urllib.request.urlopen(f"{url}/jobs/{run['job_id']}"))
assert job["state"] == "done", job["state"]
limits = [s.get("power_limit_w") for s in job["current_plan"]["stages"]]
assert all(l is not None for l in limits), limits
if name == "zeus-global":
    assert len(set(limits)) == 1, limits
first = [i for i in run["iterations"] if i["round"] == 0]
final = [i for i in run["iterations"] if i["final"]]
mean = lambda rows, key: sum(r[key] for r in rows) / len(rows)
assert mean(final, "energy_j") < mean(first, "energy_j"), (mean(final, "energy_j"), mean(first, "energy_j"))
print(name, "limits", limits)
PY
done
echo ok
