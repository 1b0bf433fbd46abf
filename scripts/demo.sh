#!/usr/bin/env bash
# The main job on the embedded default: synthesize an 8-stage GPT-style profile on the A100
# model, compute the iteration time-energy frontier for 1F1B with 12 microbatches, and print the
# all-max reference, the fastest plan's saving and points along the frontier.
# Then render the report (frontier with baselines, timeline, straggler sweep) as HTML and SVG.
# Output goes to out/demo/ (profile.csv, the frontier directory, report.html and one SVG per chart).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
perseus=$root/build/src/perseus
out=$root/out/demo
mkdir -p "$out"
"$perseus" profile synth --gpu a100 --stages 8 --out "$out/profile.csv"
"$perseus" plan --profile "$out/profile.csv" --stages 8 --microbatches 12 \
  --blocking-power 83.64 --out "$out/frontier"
# The same frontier as a report: frontier with baselines, timeline of the fastest plan,
# straggler sweep (16 pipelines, 8-way tensor parallelism), one HTML page plus an SVG per chart.
"$perseus" report --profile "$out/profile.csv" --blocking-power 83.64 --frontier "$out/frontier" \
  --out "$out/report.html"
