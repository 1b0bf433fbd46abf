#!/usr/bin/env bash
# `perseus emulate` runs a plan (all-max, a plan file, a frontier plan) on the timeline: the
# emulated time of a frontier plan equals what frontier.csv reports, the timeline CSV has one row
# per instruction and a critical path, noise is seeded and a slow GPU slows the pipeline.
# `perseus emulate cluster` writes the straggler sweep as CSV. Bad input gets one-line errors.
# Uses a synthesized profile, not the shared data.
# Usage: bash emulate_cli.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

# Third word of the line whose first word is $1 in file $2 ("iteration time 2.84 s").
third_of() { awk -v k="$1" '$1 == k { print $3 }' "$2"; }

"$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/p.csv" > /dev/null
"$perseus" plan --profile "$tmp/p.csv" --stages 4 --microbatches 6 --blocking-power 83.64 \
  --out "$tmp/f" --quiet

# Every 7th frontier plan: emulated time and energy match frontier.csv.
rows=$(($(wc -l < "$tmp/f/frontier.csv") - 1))
for ((i = 0; i < rows; i += 7)); do
  "$perseus" emulate --profile "$tmp/p.csv" --frontier "$tmp/f" --index $i > "$tmp/out"
  want_t=$(awk -F, -v i=$i 'NR > 1 && $1 == i { print $4 }' "$tmp/f/frontier.csv")
  want_e=$(awk -F, -v i=$i 'NR > 1 && $1 == i { print $5 }' "$tmp/f/frontier.csv")
  agree "$(third_of iteration "$tmp/out")" "$want_t" || fail "plan $i: time $(cat "$tmp/out")"
  agree "$(value_of energy "$tmp/out")" "$want_e" || fail "plan $i: energy"
done

# An exported plan file emulates like the frontier plan; the timeline CSV is complete.
"$perseus" plan export --frontier "$tmp/f" --index 3 --out "$tmp/x" > /dev/null
"$perseus" emulate --profile "$tmp/p.csv" --plan "$tmp/x/plan_00003.json" --blocking-power 83.64 \
  --timeline "$tmp/t.csv" > "$tmp/a"
"$perseus" emulate --profile "$tmp/p.csv" --frontier "$tmp/f" --index 3 > "$tmp/b"
[[ $(third_of iteration "$tmp/a") == $(third_of iteration "$tmp/b") ]] || fail "plan file differs"
[[ $(head -1 "$tmp/t.csv") == rank,position,stage,instruction,microbatch,frequency_mhz,start_s,* ]] ||
  fail "timeline header: $(head -1 "$tmp/t.csv")"
[[ $(($(wc -l < "$tmp/t.csv") - 1)) -eq 48 ]] || fail "timeline rows: $(wc -l < "$tmp/t.csv")"
awk -F, 'NR > 1 && $11 == 1 { n++ } END { exit !(n >= 6) }' "$tmp/t.csv" || fail "no critical path"

# All-max with a seeded noise: same seed, same result; a slow GPU is slower.
allmax=(emulate --profile "$tmp/p.csv" --microbatches 6 --blocking-power 83.64)
"$perseus" "${allmax[@]}" --noise 0.05 --seed 3 > "$tmp/n1"
"$perseus" "${allmax[@]}" --noise 0.05 --seed 3 > "$tmp/n2"
"$perseus" "${allmax[@]}" --noise 0.05 --seed 4 > "$tmp/n3"
cmp -s "$tmp/n1" "$tmp/n2" || fail "same seed, different result"
! cmp -s "$tmp/n1" "$tmp/n3" || fail "different seed, same result"
"$perseus" "${allmax[@]}" > "$tmp/base"
"$perseus" "${allmax[@]}" --slow-stage 1 --slow-factor 1.3 > "$tmp/slow"
awk -v a="$(third_of iteration "$tmp/base")" -v b="$(third_of iteration "$tmp/slow")" \
  'BEGIN { exit !(b > a) }' || fail "slow GPU not slower"

# Cluster sweep: 51 factors as CSV, the saving grows from f = 1 where there is no extrinsic part.
"$perseus" emulate cluster --frontier "$tmp/f" --gpus 1024 --tensor-parallel 8 \
  --out "$tmp/sweep.csv" --quiet
[[ $(($(wc -l < "$tmp/sweep.csv") - 1)) -eq 51 ]] || fail "sweep rows"
awk -F, 'NR == 2 { if ($1 != 1 || ($10 + 0) > 1e-9 || $9 <= 0) exit 1 }' "$tmp/sweep.csv" ||
  fail "f = 1 row: $(sed -n 2p "$tmp/sweep.csv")"
awk -F, 'NR == 12 { exit !($11 > 0 && $10 > 0) }' "$tmp/sweep.csv" || fail "no extrinsic saving"
"$perseus" emulate cluster --frontier "$tmp/f" --pipelines 4 --factors 1.1,1.2 > "$tmp/table"
grep -q "4 pipelines x 4 stages x 1-way tensor parallel = 16 GPUs" "$tmp/table" ||
  fail "cluster summary: $(cat "$tmp/table")"

# A single plan file (a baseline's) in the sweep: every pipeline runs it, so there is no
# extrinsic part, and at f = 1 the saving is that plan's own against all-max.
"$perseus" baseline envpipe --profile "$tmp/p.csv" --microbatches 6 --blocking-power 83.64 \
  --out "$tmp/envpipe.json" > "$tmp/envpipe.txt"
"$perseus" emulate cluster --plan "$tmp/envpipe.json" --profile "$tmp/p.csv" --pipelines 4 \
  --factors 1,1.2 --out "$tmp/env_sweep.csv" > "$tmp/env_table"
grep -q "^swept 2 factors over 1 plan" "$tmp/env_table" || fail "plan sweep: $(cat "$tmp/env_table")"
saving=$(value_of energy_saving_percent "$tmp/envpipe.txt")
awk -F, -v s="$saving" 'NR > 1 { if ($8 != 0 || $10 + 0 != 0) exit 1 }
  NR == 2 { d = $9 - s; if (d < -0.01 || d > 0.01) exit 1 }' "$tmp/env_sweep.csv" ||
  fail "plan sweep: saving $saving vs $(cat "$tmp/env_sweep.csv")"
expect_error "--plan needs --profile" emulate cluster --plan "$tmp/envpipe.json" --pipelines 4
expect_error "give either --frontier or --plan" emulate cluster --pipelines 4
# The frontier fixes the instruction order: an option that says otherwise is refused (issue
# 51.6: --microbatches 8 was ignored); one that agrees is accepted.
expect_error "--microbatches 8 does not match frontier $tmp/f (planned for 6 microbatches)" \
  emulate --profile "$tmp/p.csv" --frontier "$tmp/f" --index 0 --microbatches 8
expect_error "--schedule gpipe does not match frontier $tmp/f (planned for 1f1b)" \
  emulate --profile "$tmp/p.csv" --frontier "$tmp/f" --index 0 --schedule gpipe
"$perseus" emulate --profile "$tmp/p.csv" --frontier "$tmp/f" --index 0 --microbatches 6 \
  --quiet || fail "--microbatches equal to the frontier's was refused"
# The choice of plan is printed per factor: index and its own time.
grep -q "plan_time_s" "$tmp/table" || fail "no plan per factor: $(cat "$tmp/table")"

# Bad input.
echo "hello" > "$tmp/bad.plan"
expect_error "bad.plan" emulate --profile "$tmp/p.csv" --plan "$tmp/bad.plan" --blocking-power 80
expect_error "microbatches" emulate --profile "$tmp/p.csv" --plan "$tmp/x/plan_00003.json" \
  --blocking-power 80 --microbatches 7
expect_error "slowdown factor must be >= 1" "${allmax[@]}" --slow-stage 1 --slow-factor 0.5
expect_error "slow GPU 9 out of range" "${allmax[@]}" --slow-gpu 9 --slow-factor 1.5
expect_error "--slow-factor needs --slow-gpu" "${allmax[@]}" --slow-factor 1.5
expect_error "noise" "${allmax[@]}" --noise -1
expect_error "--blocking-power is required" emulate --profile "$tmp/p.csv" --microbatches 6
expect_error "below 1" emulate cluster --frontier "$tmp/f" --pipelines 4 --factors 0.9
expect_error "step must be positive" emulate cluster --frontier "$tmp/f" --pipelines 4 \
  --factors 1:2:0
expect_error "pipelines must be at least 1, got 0" emulate cluster --frontier "$tmp/f" --pipelines 0
expect_error "pipelines must be at least 1" emulate cluster --frontier "$tmp/f" --pipelines -2
expect_error "not both" emulate cluster --frontier "$tmp/f" --pipelines 2 --gpus 8
expect_error "--pipelines or --gpus is required" emulate cluster --frontier "$tmp/f"
expect_error "not a positive multiple" emulate cluster --frontier "$tmp/f" --gpus 1000 \
  --tensor-parallel 8
expect_error "meta.json" emulate cluster --frontier "$tmp/nowhere" --pipelines 2
echo "emulate_cli: ok"
