#!/usr/bin/env bash
# Frontier solver speed (issues 2 and 16): wall time, peak RSS, minimum cuts solved and Pareto
# rows of `perseus plan`, single thread (--threads 1), and the fastest plan against all-max:
#   - GPT-3 on A100 (shared profile, 8 stages) at M = 12, 24, 48, 96, 1 ms, exponential model as
#     published (the published Python optimizer: 24 s, 124 s, 905 s for M = 12, 24, 48), and the
#     convex hull at M = 96;
#   - Bloom on A40 (shared profile; the only A40 profile in the shared data) at M = 12, 48, 96,
#     0.1 ms, convex hull (issue 16 measured 1.2 s, 19.6 s and 73 s before its changes);
#   - a synthetic A100 pipeline of 16 GPUs at M = 128, 1 ms: 1F1B, and interleaved 1F1B with two
#     stages per GPU (32 stages).
# The largest cases run again with --threads 2 (slack reclamation on two worker threads; the
# frontier is byte-identical, checked here). Each case runs three times (the 16-GPU pipelines
# twice) and the fastest time is printed (this machine class's speed drifts by up to 30 % within
# minutes; the outputs of the runs are compared byte for byte).
# Targets (issue 16): Bloom A40 M = 96 < 5 s, GPT-3 A100 M = 96 < 0.5 s, 16 GPUs M = 128 < 10 s,
# peak RSS < 256 MB; the fastest plan no slower than all-max (slowdown_% <= 0).
# Usage: bench/plan_bench.sh [path/to/perseus]   (default build/src/perseus)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build/src/perseus}
data=$root/../shared/data/perseus/stage_profiles
[[ -d $data ]] || { echo "plan_bench: shared data not found at $data" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$perseus" profile synth --gpu a100 --stages 16 --out "$out/synth16.csv" > /dev/null
"$perseus" profile split --profile "$out/synth16.csv" --virtual-stages 2 --out "$out/synth32.csv" \
  > /dev/null

printf "%-16s %-18s %4s %-6s %-11s %3s %7s %8s %6s %7s %11s %11s\n" workload schedule M unit \
  model thr seconds peak_mb cuts pareto slowdown_% published_s
run() {  # label profile schedule microbatches unit blocking model published [threads [repeats]]
  local label=$1 profile=$2 schedule=$3 mbs=$4 unit=$5 pblock=$6 model=$7 published=$8
  local threads=${9:-1} repeats=${10:-1} secs="" kb=0 s k
  for ((r = 0; r < repeats; r++)); do
    /usr/bin/time -f "%e %M" -o "$out/time" "$perseus" plan --profile "$profile" \
      --schedule "$schedule" --microbatches "$mbs" --unit-time "$unit" --blocking-power "$pblock" \
      --cost-model "$model" --threads "$threads" --out "$out/f$r" --quiet
    read -r s k <"$out/time"
    if [[ -z $secs ]] || (($(echo "$s < $secs" | bc))); then secs=$s; fi
    ((k > kb)) && kb=$k
    if ((r > 0)); then
      cmp -s "$out/f0/frontier.csv" "$out/f$r/frontier.csv" ||
        { echo "plan_bench: runs of one case differ" >&2; exit 1; }
      rm -rf "$out/f$r"
    fi
  done
  mv "$out/f0" "$out/f"
  "$perseus" plan export --frontier "$out/f" --fastest --out-dir "$out/fastest" > "$out/export"
  local cuts pareto slowdown
  cuts=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["min_cuts"])' \
    "$out/f/meta.json")
  pareto=$(awk -F, 'NR > 1 && $6 == 1 { n++ } END { print n }' "$out/f/frontier.csv")
  slowdown=$(grep -o '[-+][0-9.]* % time' "$out/export" | head -1 | cut -d' ' -f1)
  printf "%-16s %-18s %4s %-6s %-11s %3s %7s %8.1f %6s %7s %11s %11s\n" "$label" "$schedule" \
    "$mbs" "$unit" "$model" "$threads" "$secs" "$(echo "$kb / 1024" | bc -l)" "$cuts" "$pareto" \
    "$slowdown" "$published"
  if ((threads == 1)); then
    rm -rf "$out/one" && mv "$out/f" "$out/one"
  else
    for f in frontier.csv plans.txt; do
      cmp -s "$out/one/$f" "$out/f/$f" || { echo "plan_bench: --threads $threads changed $f" >&2; exit 1; }
    done
  fi
  rm -rf "$out/f" "$out/fastest"
}

gpt=$data/gpt3-175b+a100_sxm_bf16.csv bloom=$data/bloom+a40_bf16.csv
run gpt3-a100 "$gpt" 1f1b 12 0.001 83.64 exponential 24 1 3
run gpt3-a100 "$gpt" 1f1b 24 0.001 83.64 exponential 124 1 3
run gpt3-a100 "$gpt" 1f1b 48 0.001 83.64 exponential 905 1 3
run gpt3-a100 "$gpt" 1f1b 96 0.001 83.64 exponential - 1 3
run gpt3-a100 "$gpt" 1f1b 96 0.001 83.64 exponential - 2 3
run gpt3-a100 "$gpt" 1f1b 96 0.001 83.64 convex-hull - 1 3
run gpt3-a100 "$gpt" 1f1b 96 0.001 83.64 convex-hull - 2 3
run bloom-a40 "$bloom" 1f1b 12 0.0001 70.38 convex-hull - 1 3
run bloom-a40 "$bloom" 1f1b 48 0.0001 70.38 convex-hull - 1 3
run bloom-a40 "$bloom" 1f1b 96 0.0001 70.38 convex-hull - 1 3
run synth-a100x16 "$out/synth16.csv" 1f1b 128 0.001 83.64 convex-hull - 1 2
run synth-a100x16 "$out/synth16.csv" 1f1b 128 0.001 83.64 convex-hull - 2 2
run synth-a100x16 "$out/synth32.csv" interleaved-1f1b 128 0.001 83.64 convex-hull - 1 2
run synth-a100x16 "$out/synth32.csv" interleaved-1f1b 128 0.001 83.64 convex-hull - 2 2
