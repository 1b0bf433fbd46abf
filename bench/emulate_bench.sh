#!/usr/bin/env bash
# Cluster emulation speed (issue 3): the straggler sweep over 8192 GPUs (128 pipelines x 8 stages
# x 8-way tensor parallelism) and 50 slowdown factors (1.01..1.50), once the frontier exists.
# Target: well under a second. Prints the in-process sweep time and the wall time of the whole
# command (reading the frontier directory included), for GPT-3 A100 frontiers at M = 12 and 96.
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
