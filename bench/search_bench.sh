#!/usr/bin/env bash
# Parallelization search speed and quality (issue 5): wall time and best iteration time of
# `perseus search` on the Aceso miniset (1 node x 4 GPUs, global batch 512, 12000 MB, microbatch
# sizes 1,2,4,8) for GPT-1.3B (reference best 58760.92 ms) and T5-770M (33659.50 ms), targets
# < 5 s each; the Megatron-LM-style grid on GPT-1.3B (reference 73654.74 ms); Wide-ResNet 1B
# (global batch 768, per-GPU microbatch sizes 16-64, reference best 17672.05 ms), also with the
# energy objective (issue 17, A100 GPU model, within 5 % of the fastest); and 1024-layer
# GPTs on 1 node x 8 GPUs, target < 60 s: the GPT-1.3B layer profile (miniset; 1024 such layers
# are a ~50B-parameter model, so nothing fits under 150000 MB per GPU) and GPT-350M layers
# (eurosys-gpt350M profiles, global batch 1024, 80000 MB).
# Usage: bench/search_bench.sh [path/to/perseus]   (default build/src/perseus)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build/src/perseus}
data=${PERSEUS_SHARED_DATA:-$root/../shared/data}/aceso
[[ -d $data/miniset ]] || { echo "search_bench: aceso data not found at $data" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # label reference_ms target_s perseus-arguments...
  local label=$1 reference=$2 target=$3
  shift 3
  /usr/bin/time -f "%e %M" -o "$out/time" "$perseus" search "$@" >"$out/log"
  read -r secs kb <"$out/time"
  local best stages
  best=$(awk '/^best:/ {print $4}' "$out/log")
  stages=$(awk '/^best:/ {print $2}' "$out/log")
  printf "%-22s best_ms=%-12s stages=%-3s reference_ms=%-10s seconds=%-6s target_s=%-4s peak_rss_mb=%.1f\n" \
    "$label" "$best" "$stages" "$reference" "$secs" "$target" "$(echo "$kb / 1024" | bc -l)"
}

small=(--database "$data/miniset" --num-layers 24 --nodes 1 --gpus-per-node 4
  --global-batch-size 512 --micro-batch-sizes 1,2,4,8 --memory-limit 12000)
run gpt-1.3b-4gpu 58760.92 5 "${small[@]}" --model gpt --model-size 1_3B
run t5-770m-4gpu 33659.50 5 "${small[@]}" --model t5 --model-size 770M
run gpt-1.3b-4gpu-grid 73654.74 - grid "${small[@]}" --model gpt --model-size 1_3B
resnet=(--database "$data/miniset" --model resnet --model-size 1B --num-layers 16 --nodes 1
  --gpus-per-node 4 --global-batch-size 768 --micro-batch-sizes 16,32,48,64 --memory-limit 12000)
run resnet-1b-4gpu 17672.05 5 "${resnet[@]}"
run resnet-1b-4gpu-energy - 10 "${resnet[@]}" --objective energy --max-slowdown 5%
run gpt-1.3b-1024layer-8gpu - 60 --database "$data/miniset" --model gpt --model-size 1_3B \
  --num-layers 1024 --nodes 1 --gpus-per-node 8 --global-batch-size 512 \
  --micro-batch-sizes 1,2,4,8 --memory-limit 150000
run gpt-350m-1024layer-8gpu - 60 --database "$data/eurosys-gpt350M" --model gpt --model-size 350M \
  --num-layers 1024 --nodes 1 --gpus-per-node 8 --global-batch-size 1024 --memory-limit 80000
