#!/usr/bin/env bash
# End-to-end: a real server process and real client processes on loopback run the whole loop on
# simulated GPUs (scripts/closed_loop.sh): profile with the instruction profiler -> plan ->
# point solution of the fastest frontier plan -> measured results. The fastest plan must cost
# less energy than all-max and take at most 1% longer; the profile the server measured must be
# the simulated GPUs' profile; measured all-max must match the planner's evaluation. The GPUs'
# energy counters are ideal here (exact reads), so every number must match exactly;
# control_plane_counter.sh runs the realistic counter. The loop runs 1F1B (one stage per GPU),
# and ZBV and interleaved zero bubble, where each GPU runs two stages and the backward is split
# into backward_input and backward_weight, which the profiler measures per stage.
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

# check_loop SCHEDULE PROFILE_ROWS [SYNTH_OPTS]: the closed loop on 4 GPUs, 6 microbatches.
check_loop() {
  local schedule=$1 rows=$2 loop=$tmp/$1
  PERSEUS_SIM_OPTS="--counter ideal" PERSEUS_SCHEDULE=$schedule PERSEUS_SYNTH_OPTS=${3:-} \
    PERSEUS_BIN=$perseus bash "$root/scripts/closed_loop.sh" "$loop" 4 6 10 > "$tmp/loop.log" ||
    fail "$schedule: closed loop failed: $(cat "$tmp/loop.log")"
  local summary=$loop/summary.txt
  awk '$1 == "energy_saving_pct" {exit !($2 > 1.0)}' "$summary" ||
    fail "$schedule: fastest plan saves no energy: $(cat "$summary")"
  awk '$1 == "slowdown_pct" {exit !($2 < 1.0 && $2 > -1.0)}' "$summary" ||
    fail "$schedule: fastest plan not within 1% of all-max: $(cat "$summary")"

  # The profiler's CSV reproduces the simulated GPUs' rows for every clock it measured, and has
  # every (stage, instruction) of the simulated GPUs.
  /usr/bin/python3 - "$loop/profile.csv" "$loop/gpus.csv" "$rows" <<'PY' ||
import csv, sys
measured = {(r["stage"], r["instruction"], r["frequency"]): r for r in csv.DictReader(open(sys.argv[1]))}
truth = {(r["stage"], r["instruction"], r["frequency"]): r for r in csv.DictReader(open(sys.argv[2]))}
kinds = lambda rows: {(s, i) for s, i, f in rows}
assert kinds(measured) == kinds(truth) or kinds(measured) == {k for k in kinds(truth) if k[1] != "backward"}, kinds(measured)
assert len(kinds(measured)) == int(sys.argv[3]), len(kinds(measured))
assert len(measured) >= len(kinds(measured)) * 5, len(measured)
for key, row in measured.items():
    for field in ("time", "energy"):
        a, b = float(row[field]), float(truth[key][field])
        assert abs(a - b) <= 1e-9 * max(1.0, abs(b)), (key, field, a, b)
PY
    fail "$schedule: profile mismatch"

  # Measured all-max equals the planner's evaluation of the all-max plan on the true profile.
  "$perseus" baseline all-max --profile "$loop/gpus.csv" --schedule "$schedule" \
    --microbatches 6 --blocking-power 83.64 > "$tmp/allmax.txt"
  agree "$(value_of time_s "$tmp/allmax.txt")" "$(value_of all_max_time_s "$summary")" ||
    fail "$schedule: all-max time: planner $(value_of time_s "$tmp/allmax.txt"), measured $(cat "$summary")"
  awk -v a="$(value_of energy_j "$tmp/allmax.txt")" -v b="$(value_of all_max_energy_j "$summary")" \
    'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d < 1e-3 * a)}' ||
    fail "$schedule: all-max energy: planner $(value_of energy_j "$tmp/allmax.txt"), measured $(cat "$summary")"
  # The served plan measures what the planner evaluated for it.
  local plan evaluated
  plan=$(ls "$loop"/plans/*.json | head -1)
  evaluated=$(/usr/bin/python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["evaluated"]
print(e["time_s"], e["energy_j"])' "$plan")
  agree "${evaluated% *}" "$(value_of plan_time_s "$summary")" ||
    fail "$schedule: plan time: evaluated ${evaluated% *}, measured $(cat "$summary")"
  awk -v a="${evaluated#* }" -v b="$(value_of plan_energy_j "$summary")" \
    'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d < 1e-3 * a)}' ||
    fail "$schedule: plan energy: evaluated ${evaluated#* }, measured $(cat "$summary")"
  echo "ok $schedule: $(tr '\n' ' ' < "$summary")"
}

check_loop 1f1b 8
check_loop zbv 24 "--virtual-stages 2 --split-backward"
check_loop interleaved-zero-bubble 24 "--virtual-stages 2 --split-backward"
