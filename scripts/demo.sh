#!/usr/bin/env bash
# The main job on the embedded default, end to end: start the control-plane server, profile an
# 8-stage GPT-style pipeline on simulated A100s (the embedded default profile) with the
# instruction profiler, plan the iteration time-energy frontier for 1F1B with 12 microbatches
# from the measured profile, run the fastest plan and all-max through the server, and print the
# measured time and energy against all-max (scripts/closed_loop.sh). Then render the report
# (frontier with baselines, timeline, straggler sweep) as HTML and SVG.
# Output goes to out/demo/ (measured profile.csv, frontier/, the runs' JSON, summary.txt,
# report.html and one SVG per chart).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
perseus=$root/build/src/perseus
out=$root/out/demo
rm -rf "$out" && mkdir -p "$out"
PERSEUS_BIN=$perseus bash "$root/scripts/closed_loop.sh" "$out" 8 12 20 a100
p_block=$(printf "%.2f" "$(cat "$out/profile.csv.blocking_power")")
"$perseus" report --profile "$out/profile.csv" --blocking-power "$p_block" \
  --frontier "$out/frontier" --measured "all-max=$out/all-max.json" \
  --measured "fastest plan=$out/plan.json" --out "$out/report.html"
