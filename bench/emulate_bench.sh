#!/usr/bin/env bash
# Cluster emulation speed (issue 3): the straggler sweep over 8192 GPUs (128 pipelines x 8 stages
# x 8-way tensor parallelism) and 50 slowdown factors (1.01..1.50), once the frontier exists.
# Target: well under a second. Prints the in-process sweep time and the wall time of the whole
# command (reading the frontier directory included), for GPT-3 A100 frontiers at M = 12 and 96.
# Issue 14: the 65,845-plan frontier (Bloom 176B on A40, the published A40 profile, 8 stages,
# M = 96, 0.1 ms unit; planning it takes about 75 s) must sweep in under 100 MB: the sweep reads
# only frontier.csv and meta.json, never the plans.
# Usage: bench/emulate_bench.sh [path/to/perseus]   (default build/src/perseus)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build/src/perseus}
data=$root/../shared/data/perseus/stage_profiles
[[ -d $data ]] || { echo "emulate_bench: shared data not found at $data" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for mbs in 12 96; do
  "$perseus" plan --profile "$data/gpt3-175b+a100_sxm_bf16.csv" --stages 8 --microbatches $mbs \
    --blocking-power 83.64 --out "$out/f$mbs" --quiet
  /usr/bin/time -f "%e %M" -o "$out/time" "$perseus" emulate cluster --frontier "$out/f$mbs" \
    --gpus 8192 --tensor-parallel 8 --factors 1.01:1.50:0.01 --out "$out/sweep.csv" > "$out/log"
  read -r secs kb < "$out/time"
  sweep=$(awk '/^swept/ { print $(NF - 1) }' "$out/log")
  printf "gpt3-a100 M=%-3s gpus=8192 factors=%s sweep_s=%s command_wall_s=%s peak_rss_mb=%.1f\n" \
    $mbs "$(($(wc -l < "$out/sweep.csv") - 1))" "$sweep" "$secs" "$(echo "$kb / 1024" | bc -l)"
done

"$perseus" plan --profile "$data/bloom+a40_bf16.csv" --stages 8 --microbatches 96 \
  --blocking-power 70.38 --unit-time 0.0001 --out-dir "$out/a40" --quiet
/usr/bin/time -f "%e %M" -o "$out/time" "$perseus" emulate cluster --frontier "$out/a40" \
  --gpus 8192 --tensor-parallel 8 --factors 1.01:1.50:0.01 --out "$out/sweep.csv" > "$out/log"
read -r secs kb < "$out/time"
printf "bloom-a40 M=96 unit=0.1ms plans=%s pareto=%s command_wall_s=%s peak_rss_mb=%.1f (target < 100)\n" \
  "$(($(wc -l < "$out/a40/frontier.csv") - 1))" "$(awk -F, 'NR > 1 && $6 == 1' "$out/a40/frontier.csv" | wc -l)" \
  "$secs" "$(echo "$kb / 1024" | bc -l)"
