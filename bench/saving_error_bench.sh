#!/usr/bin/env bash
# Whether the error `perseus plan` states beside each saving covers what the measured profile's
# errors cost the plans (perseus/plan/saving_error.hpp): the closed loop on simulated H100s whose
# last stage the counter cannot split (4 stages, forwards of 12 ms drawing 23 % more than the
# backwards; realistic counter), profiled with 8 and with 12 microbatches; every frontier plan
# (one per 3 ms of iteration time) evaluated on the measured profile and on the simulated GPUs'
# own; each with the profiler's split-clock rounds (the default) and without (`split_pooled`
# false). Prints, per case: the profiler's rounds (split-clock among them) and seconds of
# training, plans, how many differ by more than 3 standard errors, how many lie within 3
# standard errors plus the pooling bound, the largest difference and the largest ratio of a
# difference to its 3 standard errors plus bound. PERSEUS_SIM_OPTS reaches the simulated GPUs
# (scripts/closed_loop.sh), e.g. "--counter-noise 0.01 --counter-seed 3".
# Usage: bash bench/saving_error_bench.sh [build dir=build]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${1:-$root/build}/src/perseus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$perseus" profile synth --gpu h100 --stages 4 --forward-time 0.012 --out "$tmp/h100.csv" >/dev/null
awk -F, -v OFS=, 'NR == 1 {print; next} {$5 *= ($2 == "forward" ? 1.12 : 0.9); print}' \
  "$tmp/h100.csv" > "$tmp/forward-heavy.csv"
saving_on() {  # plan, profile, blocking power -> "saving stderr pooling_bound"
  "$perseus" plan evaluate --profile "$2" --plan "$1" --blocking-power "$3" |
    awk '/^energy_saving_percent/ {s = $2} /^energy_saving_stderr_percent/ {e = $2}
      /^energy_saving_pooling_bound_percent/ {b = $2} END {print s, e, b}'
}
for split in true false; do for microbatches in 8 12; do
  out=$tmp/loop-$microbatches-$split
  PERSEUS_GPUS_PROFILE=$tmp/forward-heavy.csv PERSEUS_BIN=$perseus \
    PERSEUS_PROFILER_ARGS="\"split_pooled\": $split" \
    bash "$root/scripts/closed_loop.sh" "$out" 4 "$microbatches" 20 h100 > "$out.log" 2>&1
  rounds=$(/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
print("%d rounds (%d split-clock), %.0f s" % (s["rounds"], s["split_rounds"], s["measured_s"]))' \
    "$out/profile.csv.json")
  for blocking in 90 110; do
    "$perseus" plan --profile "$out/profile.csv" --microbatches "$microbatches" \
      --blocking-power "$blocking" --out-dir "$out/frontier-$blocking" --quiet
    "$perseus" plan export --frontier "$out/frontier-$blocking" --every 0.003 \
      --out-dir "$out/plans-$blocking" >/dev/null
    for plan in "$out/plans-$blocking"/*.json; do
      echo "$(saving_on "$plan" "$out/profile.csv" "$blocking")" \
        "$(saving_on "$plan" "$out/gpus.csv" "$blocking")"
    done | awk -v case="split $split, $microbatches microbatches, $blocking W, $rounds" '
      {d = $1 - $4; if (d < 0) d = -d; n++; if (d > 3 * $2) beyond++
       if (d <= 3 * $2 + $3) covered++; if (d > worst) worst = d
       r = d / (3 * $2 + $3); if (r > ratio) ratio = r}
      END {printf "%-62s plans %3d  beyond 3 se %3d  within 3 se + bound %3d  largest difference %.2f points  largest ratio %.2f\n",
           case, n, beyond, covered, worst, ratio}'
  done
done; done
