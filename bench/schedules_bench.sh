#!/usr/bin/env bash
# Energy planning on the schedules people train with (issue 15): the shared GPT-3 175B A100
# profile (8 stages, published artifacts), 8 GPUs, 24 microbatches, 1 ms unit, blocking power
# 83.64 W. Interleaved and V-shaped schedules run 16 stages on the 8 GPUs: every measured stage is
# cut into 2 virtual stages of half its time and energy at every clock (`perseus profile split
# --virtual-stages 2`); zero-bubble schedules split each backward into an input part and a
# weight part of equal time and energy (--split-backward, input fraction 0.5, as the zero-bubble
# paper measures). Prints, per schedule: all-max iteration time and energy, the fastest and the
# least-energy frontier plans (time, energy, saving against that schedule's all-max) and the
# planning time (wall clock of `perseus plan`, single thread).
# Usage: bench/schedules_bench.sh [perseus] [shared-data-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build/src/perseus}
data=${2:-$root/../shared/data}
profile=$data/perseus/stage_profiles/gpt3-175b+a100_sxm_bf16.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$perseus" profile split --profile "$profile" --split-backward --out "$tmp/p8.csv" > /dev/null
"$perseus" profile split --profile "$profile" --virtual-stages 2 --split-backward \
  --out "$tmp/p16.csv" > /dev/null

printf "%-24s %6s %9s %10s %9s %10s %7s %9s %10s %7s %8s\n" schedule stages allmax_s allmax_J \
  fastest_s fastest_J save_% minE_s minE_J save_% plan_s
bench() {  # label, profile, schedule options...
  local label=$1 prof=$2
  shift 2
  local start end
  start=$(date +%s.%N)
  "$perseus" plan --profile "$prof" --microbatches 24 --blocking-power 83.64 --unit-time 0.001 \
    "$@" --out "$tmp/f" --quiet
  end=$(date +%s.%N)
  /usr/bin/python3 - "$tmp/f" "$label" "$start" "$end" <<'PY'
import csv, json, sys
d, label, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
meta = json.load(open(f"{d}/meta.json"))
rows = [r for r in csv.DictReader(open(f"{d}/frontier.csv")) if r["pareto"] == "1"]
t = lambda r: float(r["evaluated_time_s"])
e = lambda r: float(r["evaluated_energy_j"])
fastest = min(rows, key=lambda r: (t(r), e(r)))
least = min(rows, key=e)
at, ae = meta["all_max"]["time_s"], meta["all_max"]["energy_j"]
save = lambda r: 100 * (ae - e(r)) / ae
print(f"{label:24} {meta['num_stages']:6} {at:9.4f} {ae:10.1f} {t(fastest):9.4f} {e(fastest):10.1f} "
      f"{save(fastest):7.2f} {t(least):9.4f} {e(least):10.1f} {save(least):7.2f} {end - start:8.2f}")
PY
}
bench 1f1b "$profile" --schedule 1f1b
bench "interleaved-1f1b (V=2)" "$tmp/p16.csv" --schedule interleaved-1f1b --virtual-stages 2
bench "interleaved-zero-bubble" "$tmp/p16.csv" --schedule interleaved-zero-bubble \
  --virtual-stages 2
bench zbv "$tmp/p16.csv" --schedule zbv
bench "zero-bubble (V=1)" "$tmp/p8.csv" --schedule interleaved-zero-bubble --virtual-stages 1
