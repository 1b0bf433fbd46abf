#!/usr/bin/env bash
# The whole Perseus loop on simulated GPUs, every step a real process talking to a real server:
#   1. start `perseus serve` (SQLite store, loopback, any free port)
#   2. profile: a simulated pipeline job runs under the instruction profiler, which sweeps the
#      SM clock from high to low and writes the profile CSV and the measured blocking power
#   3. plan: `perseus plan` computes the time-energy frontier from the measured profile
#   4. run: the same job under all-max, then under the fastest frontier plan (point solution)
#   5. print measured time and energy of the plan against all-max (and write summary.txt)
# Usage: closed_loop.sh OUT_DIR GPUS MICROBATCHES ITERATIONS [GPU]
# The simulated GPUs (GPUS per pipeline) run the embedded default profile (`perseus profile synth
# --gpu GPU`) with a realistic energy counter (100 ms refresh, 4 ms reads). Environment:
# PERSEUS_SIM_OPTS adds options to every `simulate-training` (e.g. "--counter ideal" or
# "--attribution deltas"), PERSEUS_SYNTH_OPTS to `profile synth` (e.g. "--forward-time 0.003",
# or "--virtual-stages 2 --split-backward" for the schedules below), PERSEUS_GPUS_PROFILE a
# profile CSV the simulated GPUs run instead of the synthetic one, PERSEUS_PROFILER_ARGS fields
# to the profiler's arguments (e.g. '"target_stderr": 0.005'), PERSEUS_SCHEDULE the pipeline
# schedule of every step (default 1f1b; e.g. zbv, with its default stages per GPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perseus=${PERSEUS_BIN:-$root/build/src/perseus}
out=$(mkdir -p "$1" && cd "$1" && pwd)
gpus=$2 microbatches=$3 iterations=$4 gpu=${5:-a100}
schedule=${PERSEUS_SCHEDULE:-1f1b}
declare -A blocking=([a100]=83.64 [a40]=70.38 [h100]=110)

"$perseus" serve --port 0 --store "$out/store.sqlite" --output-dir "$out/jobs" --data-dir "$out" \
  > "$out/server.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 200); do grep -q listening "$out/server.log" && break; sleep 0.05; done
url=$(grep -o 'http://[0-9.:]*' "$out/server.log")
echo "server        $url (store $out/store.sqlite)"

# The simulated GPUs: the embedded default profile (what a real cluster would be measured as).
if [[ -n ${PERSEUS_GPUS_PROFILE:-} ]]; then
  cp "$PERSEUS_GPUS_PROFILE" "$out/gpus.csv"
else
  "$perseus" profile synth --gpu "$gpu" --stages "$gpus" --out "$out/gpus.csv" \
    ${PERSEUS_SYNTH_OPTS:-} >/dev/null
fi
simulate() {  # scheduler, scheduler args (JSON), output file, extra options...
  "$perseus" simulate-training --server "$url" --profile "$out/gpus.csv" \
    --microbatches "$microbatches" --blocking-power "${blocking[$gpu]}" --quiet \
    --schedule "$schedule" --scheduler "$1" --scheduler-args "$2" --out "$3" \
    ${PERSEUS_SIM_OPTS:-} "${@:4}"
}
job="\"microbatches\": $microbatches, \"schedule\": \"$schedule\""

echo "1/4 profiling with the instruction profiler ..."
simulate profiler \
  "{$job, \"output\": \"profile.csv\"${PERSEUS_PROFILER_ARGS:+, $PERSEUS_PROFILER_ARGS}}" \
  "$out/profile-run.json" --until-done
# The profiler wrote in the job's own folder, $out/jobs/<job id>/.
profiled=$(/usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['job_id'])" \
  "$out/profile-run.json")
cp "$out/jobs/$profiled"/profile.csv* "$out/"
p_block=$(printf "%.2f" "$(cat "$out/profile.csv.blocking_power")")
echo "    measured $(($(wc -l < "$out/profile.csv") - 1)) profile rows, blocking power $p_block W"

echo "2/4 planning the frontier ..."
"$perseus" plan --profile "$out/profile.csv" --microbatches "$microbatches" \
  --schedule "$schedule" --blocking-power "$p_block" --out-dir "$out/frontier" --quiet \
  > "$out/plan.log"
rm -rf "$out/plans"
"$perseus" plan export --frontier "$out/frontier" --fastest --out-dir "$out/plans" > "$out/export.log"
echo "    $(head -1 "$out/export.log")"
plan_file=$(ls "$out"/plans/*.json | head -1)

echo "3/4 running all-max ..."
simulate all-max "{$job}" "$out/all-max.json" \
  --iterations "$iterations"
echo "4/4 running the fastest frontier plan (point solution) ..."
simulate point-solution "{\"solution_path\": \"$plan_file\"}" "$out/plan.json" \
  --iterations "$iterations"

/usr/bin/python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, sys
out = sys.argv[1]
base = json.load(open(f"{out}/all-max.json"))["final_schedule"]
plan = json.load(open(f"{out}/plan.json"))["final_schedule"]
print(f"all_max_time_s      {base['mean_time_s']:.6f}")
print(f"all_max_energy_j    {base['mean_energy_j']:.3f}")
print(f"plan_time_s         {plan['mean_time_s']:.6f}")
print(f"plan_energy_j       {plan['mean_energy_j']:.3f}")
print(f"energy_saving_pct   {100 * (1 - plan['mean_energy_j'] / base['mean_energy_j']):.2f}")
print(f"slowdown_pct        {100 * (plan['mean_time_s'] / base['mean_time_s'] - 1):.2f}")
PY
