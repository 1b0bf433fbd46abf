#!/usr/bin/env bash
# Writes the synthetic operator database the search's examples use (data/search/gpt_1_3B_a100:
# a GPT-1.3B on A100s, modelled from the GPU model's data sheet; `perseus search synth-db`,
# docs/search.md). CI checks the shipped files equal what this writes.
# Usage: bash scripts/make_search_db.sh [PERSEUS_BINARY [OUT_DIR]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build/src/perseus}
out=${2:-$root/data/search/gpt_1_3B_a100}
"$perseus" search synth-db --gpu a100 --model-size 1_3B --micro-batch-sizes 1,2,4,8 \
  --tensor-parallel 1,2,4 --collective-gpus 2,4 --out-dir "$out"
