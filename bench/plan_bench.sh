#!/usr/bin/env bash
# Frontier solver speed (issue 2): wall time and peak RSS of `perseus plan`, single thread, on
# the GPT-3 A100 reference profile at M = 12, 24, 48, 96 (1 ms, exponential model as published)
# and on Bloom A40 at M = 12 (0.1 ms). The published Python optimizer needs 24 s, 124 s and 905 s
# for M = 12, 24, 48 on this machine class; targets: < 0.25 s at M = 12, < 10 s at M = 96,
# < 1 GB peak memory.
# Usage: bench/plan_bench.sh [path/to/perseus]   (default build/src/perseus)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build/src/perseus}
data=$root/../shared/data/perseus/stage_profiles
[[ -d $data ]] || { echo "plan_bench: shared data not found at $data" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # label profile microbatches unit blocking published
  local label=$1 profile=$2 mbs=$3 unit=$4 pblock=$5 published=$6
  /usr/bin/time -f "%e %M" -o "$out/time" "$perseus" plan --profile "$data/$profile" --stages 8 \
    --microbatches "$mbs" --unit-time "$unit" --blocking-power "$pblock" \
    --cost-model exponential --out "$out/f" --quiet
  read -r secs kb <"$out/time"
  local plans
  plans=$(($(wc -l <"$out/f/frontier.csv") - 1))
  printf "%-16s M=%-3s unit=%-6s plans=%-6s seconds=%-7s peak_rss_mb=%-7.1f published_s=%s\n" \
    "$label" "$mbs" "$unit" "$plans" "$secs" "$(echo "$kb / 1024" | bc -l)" "$published"
}

run gpt3-a100 gpt3-175b+a100_sxm_bf16.csv 12 0.001 83.64 24
run gpt3-a100 gpt3-175b+a100_sxm_bf16.csv 24 0.001 83.64 124
run gpt3-a100 gpt3-175b+a100_sxm_bf16.csv 48 0.001 83.64 905
run gpt3-a100 gpt3-175b+a100_sxm_bf16.csv 96 0.001 83.64 -
run bloom-a40 bloom+a40_bf16.csv 12 0.0001 70.38 -
