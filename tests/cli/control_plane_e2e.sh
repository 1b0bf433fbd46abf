#!/usr/bin/env bash
# End-to-end: a real server process and real client processes on loopback run the whole loop on
# simulated GPUs (scripts/closed_loop.sh): profile with the instruction profiler -> plan ->
# point solution of the fastest frontier plan -> measured results. The fastest plan must cost
# less energy than all-max and take at most 1% longer; the profile the server measured must be
# the simulated GPUs' profile; measured all-max must match the planner's evaluation. The GPUs'
# energy counters are ideal here (exact reads), so every number must match exactly;
# control_plane_counter.sh runs the realistic counter.
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

PERSEUS_SIM_OPTS="--counter ideal" PERSEUS_BIN=$perseus \
  bash "$root/scripts/closed_loop.sh" "$tmp/loop" 4 6 10 > "$tmp/loop.log" ||
  fail "closed loop failed: $(cat "$tmp/loop.log")"
summary=$tmp/loop/summary.txt
awk '$1 == "energy_saving_pct" {exit !($2 > 1.0)}' "$summary" ||
  fail "fastest plan saves no energy: $(cat "$summary")"
awk '$1 == "slowdown_pct" {exit !($2 < 1.0 && $2 > -1.0)}' "$summary" ||
  fail "fastest plan not within 1% of all-max: $(cat "$summary")"

# The profiler's CSV reproduces the simulated GPUs' rows for every clock it measured.
/usr/bin/python3 - "$tmp/loop/profile.csv" "$tmp/loop/gpus.csv" <<'PY' || fail "profile mismatch"
import csv, sys
measured = {(r["stage"], r["instruction"], r["frequency"]): r for r in csv.DictReader(open(sys.argv[1]))}
truth = {(r["stage"], r["instruction"], r["frequency"]): r for r in csv.DictReader(open(sys.argv[2]))}
assert len(measured) >= 4 * 2 * 5, len(measured)
for key, row in measured.items():
    for field in ("time", "energy"):
        a, b = float(row[field]), float(truth[key][field])
        assert abs(a - b) <= 1e-9 * max(1.0, abs(b)), (key, field, a, b)
PY

# Measured all-max equals the planner's evaluation of the all-max plan on the true profile.
"$perseus" baseline all-max --profile "$tmp/loop/gpus.csv" --stages 4 --microbatches 6 \
  --blocking-power 83.64 > "$tmp/allmax.txt"
agree "$(value_of time_s "$tmp/allmax.txt")" "$(value_of all_max_time_s "$summary")" ||
  fail "all-max time: planner $(value_of time_s "$tmp/allmax.txt"), measured $(cat "$summary")"
awk -v a="$(value_of energy_j "$tmp/allmax.txt")" -v b="$(value_of all_max_energy_j "$summary")" \
  'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d < 1e-3 * a)}' ||
  fail "all-max energy: planner $(value_of energy_j "$tmp/allmax.txt"), measured $(cat "$summary")"
echo "ok: $(tr '\n' ' ' < "$summary")"
