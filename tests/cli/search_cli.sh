#!/usr/bin/env bash
# `perseus search evaluate | search | search grid` on the Aceso reference data: evaluate writes
# every golden per-stage table byte for byte; the search's best GPT-1.3B and T5-770M configurations
# are at least as fast as the reference's and evaluate to the tables it wrote; the grid reproduces
# the reference's Megatron-LM baseline; bad inputs exit 1 with one `perseus: error:` line.
# Usage: bash search_cli.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
data=$2/aceso
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

if [[ ! -d $data/miniset ]]; then
  echo "search_cli: aceso data not found at $data, skipped"
  exit 0
fi

# evaluate: the golden tables, byte for byte.
for s in 1 2 3 4; do
  for m in gpt_1_3B:run_gpt_small t5_770M:run_t5_small; do
    name=${m%%:*} dir=${m##*:}
    "$perseus" search evaluate --config "$data/golden/$dir/${name}_${s}stages.json" \
      --database "$data/miniset" --out "$tmp/info.csv" > "$tmp/stdout"
    cmp -s "$tmp/info.csv" "$data/golden/$dir/info_${name}_${s}stages.csv" ||
      fail "evaluate $name ${s} stages differs from the golden table"
    grep -q '^iteration time: ' "$tmp/stdout" || fail "evaluate prints no iteration time"
  done
done
"$perseus" search evaluate --config "$data/single_gpu_configs/gpt_350M_mbs8_recomp.json" \
  --database "$data/eurosys-gpt350M" --out "$tmp/info.csv" > /dev/null
cmp -s "$tmp/info.csv" "$data/golden/cost_model_1gpu/info_gpt350M.csv" ||
  fail "evaluate gpt 350M differs from the golden table"
"$perseus" search evaluate --database "$data/miniset" \
  --config "$data/golden/megatron_grid_gpt_small/gpt_1_3B_24layers_megatron_est_73654.json" \
  > "$tmp/stdout"
grep -q '^iteration time: 73654.74 ms' "$tmp/stdout" || fail "megatron config: $(cat "$tmp/stdout")"

# search: at least as fast as the reference; its tables re-evaluate identically.
common=(--database "$data/miniset" --num-layers 24 --gpus-per-node 4 --global-batch-size 512
  --micro-batch-sizes 1,2,4,8 --memory-limit 12000)
check_search() {  # name size reference_ms [search arguments, default the common ones]
  local name=$1 size=$2 reference=$3
  shift 3
  (($#)) || set -- "${common[@]}"
  "$perseus" search "$@" --model "$name" --model-size "$size" --out "$tmp/$name" \
    > "$tmp/$name.txt"
  local best
  best=$(awk '/^best:/ {print $4}' "$tmp/$name.txt")
  awk -v b="$best" -v r="$reference" 'BEGIN {exit !(b != "" && b <= r)}' ||
    fail "search $name: best $best ms is slower than the reference $reference ms"
  for json in "$tmp/$name/${name}_${size}_"*stages.json; do
    local info
    info=$tmp/$name/info_$(basename "${json%.json}").csv
    "$perseus" search evaluate --config "$json" --database "$data/miniset" --memory-limit 12000 \
      --out "$tmp/again.csv" > /dev/null || fail "search $name: $json does not evaluate"
    cmp -s "$tmp/again.csv" "$info" || fail "search $name: $json evaluates differently"
  done
  [[ -f $tmp/$name/best.json ]] || fail "search $name: no best.json"
}
check_search gpt 1_3B 58760.92
check_search t5 770M 33659.50
# Wide-ResNet 1B: per-operator parallelism inside a stage beats the reference's best (2 stages),
# and every per-GPU microbatch is a listed size (the reference's rule).
check_search resnet 1B 17672.05 --database "$data/miniset" --num-layers 16 --gpus-per-node 4 \
  --global-batch-size 768 --micro-batch-sizes 16,32,48,64 --memory-limit 12000
/usr/bin/python3 - "$tmp/resnet/best.json" <<'PY' || fail "resnet: best.json breaks the rules"
import json, sys
c = json.load(open(sys.argv[1]))
per_op = list(zip(c["model_parallel_size_of_each_op"], c["data_parallel_size_of_each_op"]))
for tps, dps in per_op:
    assert all(c["micro_batch_size"] // dp in (16, 32, 48, 64) for dp in dps), dps
# At least one stage mixes parallel degrees across its operators.
assert any(len(set(zip(tps, dps))) > 1 for tps, dps in per_op), "no per-operator parallelism"
PY

"$perseus" search grid "${common[@]}" --model gpt --model-size 1_3B > "$tmp/grid.txt"
grep -q '^best: 4 stages, 73654.74 ms' "$tmp/grid.txt" || fail "grid: $(cat "$tmp/grid.txt")"

# Bad inputs.
expect_error "--database is required" search --gpus-per-node 4 --global-batch-size 512 \
  --memory-limit 12000 --model-size 1_3B --num-layers 24
expect_error "database directory not found" search evaluate --database "$tmp/none" \
  --config "$data/golden/run_gpt_small/gpt_1_3B_4stages.json"
sed 's/"micro_batch_size": 1/"micro_batch_size": 16/' \
  "$data/golden/run_gpt_small/gpt_1_3B_4stages.json" > "$tmp/mbs16.json"
expect_error "no profile for mbs 16" search evaluate --database "$data/miniset" \
  --config "$tmp/mbs16.json"
expect_error "--micro-batch-sizes: none of 3,5 was profiled" search --database "$data/miniset" \
  --num-layers 24 --gpus-per-node 4 --global-batch-size 512 --memory-limit 12000 --model gpt \
  --model-size 1_3B --micro-batch-sizes 3,5

expect_error "--sort-metric must be max_stage_time or total_gpu_time, got 'speed'" search \
  --database "$data/miniset" --num-layers 24 --gpus-per-node 4 --global-batch-size 512 \
  --memory-limit 12000 --model gpt --model-size 1_3B --sort-metric speed
expect_error "--peak-mem-in-backward must be at least 0 and below --memory-limit" search \
  --database "$data/miniset" --num-layers 24 --gpus-per-node 4 --global-batch-size 512 \
  --memory-limit 12000 --model gpt --model-size 1_3B --peak-mem-in-backward 12000
expect_error "--finetune-after-trial must be >= 0" search --database "$data/miniset" \
  --num-layers 24 --gpus-per-node 4 --global-batch-size 512 --memory-limit 12000 --model gpt \
  --model-size 1_3B --finetune-after-trial -1

# Energy objective: the time-optimal and energy-optimal configurations side by side; the
# energy-optimal one uses less energy than the time-optimal one's fastest plan and evaluates.
resnet=(--database "$data/miniset" --model resnet --model-size 1B --num-layers 16
  --gpus-per-node 4 --global-batch-size 768 --micro-batch-sizes 16,32,48,64 --memory-limit 12000)
"$perseus" search "${resnet[@]}" --objective energy --max-slowdown 5% --gpu a100 \
  --out "$tmp/energy" > "$tmp/energy.txt"
fastest=$(awk '/^time-optimal, fastest plan/ {print $6}' "$tmp/energy.txt")
lean=$(awk '/^energy-optimal, within bound/ {print $6}' "$tmp/energy.txt")
awk -v f="$fastest" -v l="$lean" 'BEGIN {exit !(f != "" && l != "" && l < f)}' ||
  fail "energy objective: $lean kJ is not below the fastest plan's $fastest kJ"
"$perseus" search evaluate --config "$tmp/energy/best_energy.json" --database "$data/miniset" \
  --memory-limit 12000 > /dev/null || fail "energy objective: best_energy.json does not evaluate"
[[ $(head -1 "$tmp/energy/energy.csv") == stages,micro_batch_size,gpus,* ]] ||
  fail "energy objective: no energy.csv"
expect_error "--objective must be time or energy, got 'power'" search "${resnet[@]}" \
  --objective power
expect_error "--max-slowdown: " search "${resnet[@]}" --objective energy --max-slowdown fast
expect_error "--gpu: " search "${resnet[@]}" --objective energy --gpu v100

# A model file that reuses another size's profiles (profile_prefix), as the reference reads
# T5-11B's profiles for T5-22B.
echo '{"model_name": "gpt", "model_size": "2_6B", "num_layers": 12, "profile_prefix": "gpt_1_3B"}' \
  > "$tmp/model.json"
"$perseus" search --database "$data/miniset" --model-file "$tmp/model.json" --gpus-per-node 4 \
  --global-batch-size 512 --micro-batch-sizes 1,2,4,8 --memory-limit 12000 --max-stages 2 \
  --out "$tmp/prefix" > /dev/null || fail "profile_prefix: the search failed"
grep -q '"model_size": "2_6B"' "$tmp/prefix/best.json" || fail "profile_prefix: wrong model size"

# A listed microbatch size the database lacks for one tp degree (8 at tp 2), and one it lacks
# entirely (3): the search goes on without them and names what it skipped, once each.
mkdir "$tmp/db8"
cp "$data/miniset/"{gpt_1_3B_*,prim_gpt_1_3B_*,p2p_*} "$tmp/db8/"
rm "$tmp/db8/gpt_1_3B_mbs8_tp2_algo"*.csv
"$perseus" search --database "$tmp/db8" --num-layers 24 --gpus-per-node 4 \
  --global-batch-size 512 --memory-limit 12000 --model gpt --model-size 1_3B \
  --micro-batch-sizes 1,2,4,8,3 --out "$tmp/out8" > "$tmp/stdout" 2> "$tmp/stderr" ||
  fail "search with a partly profiled microbatch size failed: $(cat "$tmp/stderr")"
grep -q '^best: ' "$tmp/stdout" || fail "partly profiled: no best line"
[[ $(wc -l < "$tmp/stderr") -eq 2 ]] || fail "partly profiled: not two notices: $(cat "$tmp/stderr")"
grep -qF "notice: --micro-batch-sizes: 8 has no profile for tp 2 algo 0,1 in $tmp/db8" \
  "$tmp/stderr" || fail "partly profiled: no notice for 8: $(cat "$tmp/stderr")"
grep -qF "notice: --micro-batch-sizes: 3 was not profiled in $tmp/db8" "$tmp/stderr" ||
  fail "partly profiled: no notice for 3: $(cat "$tmp/stderr")"
/usr/bin/python3 - "$tmp/out8/best.json" <<'PY' || fail "partly profiled: best.json uses a skipped profile"
import json, sys
c = json.load(open(sys.argv[1]))
for tps, dps in zip(c["model_parallel_size_of_each_op"], c["data_parallel_size_of_each_op"]):
    for tp, dp in zip(tps, dps):
        share = c["micro_batch_size"] // dp
        assert share in (1, 2, 4, 8) and not (share == 8 and tp == 2), (share, tp)
PY
expect_error "no configuration fits the memory limit of 100 MB" search grid --database \
  "$data/miniset" --num-layers 24 --gpus-per-node 4 --global-batch-size 512 --memory-limit 100 \
  --model gpt --model-size 1_3B --quiet
# A stage whose data-parallel degree is not a power of two (3 GPUs).
/usr/bin/python3 - "$data/golden/run_gpt_small/gpt_1_3B_2stages.json" "$tmp/dp3.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["num_gpus"][0] = c["model_parallel_size_of_each_op"][0][0] * 3
c["data_parallel_size_of_each_op"][0] = [3] * len(c["data_parallel_size_of_each_op"][0])
json.dump(c, open(sys.argv[2], "w"))
PY
expect_error "'data_parallel_size_of_each_op[0][0]': must be a power of two, got 3" \
  search evaluate --database "$data/miniset" --config "$tmp/dp3.json"
echo "search_cli: ok"
