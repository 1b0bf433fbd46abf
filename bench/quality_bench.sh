#!/usr/bin/env bash
# Cost-model quality (issue 2): evaluated energy of the convex-hull plans versus the exponential
# plans at equal iteration time, on both reference profiles and M = 12, 24, 48. A negative
# mean_diff_pct means the convex-hull frontier is cheaper.
# Usage: bench/quality_bench.sh [path/to/perseus]   (default build/src/perseus)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build/src/perseus}
data=$root/../shared/data/perseus/stage_profiles
[[ -d $data ]] || { echo "quality_bench: shared data not found at $data" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for spec in "gpt3-a100 gpt3-175b+a100_sxm_bf16.csv 0.001 83.64" \
            "bloom-a40 bloom+a40_bf16.csv 0.0001 70.38"; do
  read -r label profile unit pblock <<<"$spec"
  for mbs in 12 24 48; do
    for model in exponential convex-hull; do
      "$perseus" plan --profile "$data/$profile" --stages 8 --microbatches "$mbs" \
        --unit-time "$unit" --blocking-power "$pblock" --cost-model "$model" \
        --out "$out/$model" --quiet
    done
    printf "%-10s M=%-3s convex-hull vs exponential: " "$label" "$mbs"
    /usr/bin/python3 "$root/bench/compare_frontiers.py" "$out/exponential/frontier.csv" \
      "$out/convex-hull/frontier.csv"
  done
done
