#!/usr/bin/env bash
# `perseus baseline all-max|uniform|envpipe|zeus-global|zeus-per-stage` on a synthesized profile:
# each prints its evaluated time and energy next to all-max, writes a plan JSON that `plan
# evaluate` scores the same; the envelope schedule round-trips through the plan JSON; bad inputs
# exit 1 with one `perseus: error:` line.
# Usage: bash baseline_cli.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/lib.sh"


"$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/p.csv" > /dev/null
common=(--profile "$tmp/p.csv" --microbatches 6 --blocking-power 83.64)

for cmd in all-max uniform envpipe zeus-global zeus-per-stage; do
  "$perseus" baseline "$cmd" "${common[@]}" --out "$tmp/$cmd.json" > "$tmp/$cmd.txt" ||
    fail "baseline $cmd failed"
  for key in time_s energy_j all_max_time_s all_max_energy_j energy_saving_percent; do
    [[ -n $(value_of "$key" "$tmp/$cmd.txt") ]] || fail "baseline $cmd: no $key"
  done
  # The written plan scores as printed.
  "$perseus" plan evaluate --profile "$tmp/p.csv" --plan "$tmp/$cmd.json" --blocking-power 83.64 \
    > "$tmp/$cmd.eval"
  for key in time_s energy_j; do
    agree "$(value_of $key "$tmp/$cmd.eval")" "$(value_of $key "$tmp/$cmd.txt")" ||
      fail "baseline $cmd: $key differs from plan evaluate"
  done
  grep -q '"evaluated"' "$tmp/$cmd.json" || fail "baseline $cmd: no evaluated in plan JSON"
done

# all-max is its own reference; every other baseline saves energy on this profile.
agree "$(value_of time_s "$tmp/all-max.txt")" "$(value_of all_max_time_s "$tmp/all-max.txt")" ||
  fail "all-max time differs from its reference"
for cmd in uniform envpipe zeus-global zeus-per-stage; do
  awk -v s="$(value_of energy_saving_percent "$tmp/$cmd.txt")" 'BEGIN { exit !(s > 0) }' ||
    fail "baseline $cmd saves no energy"
done
grep -q '^envelope_reached \(yes\|no\)$' "$tmp/envpipe.txt" || fail "envpipe: no envelope_reached"
grep -q '^stop_reason .' "$tmp/envpipe.txt" || fail "envpipe: no stop_reason"
# The Zeus tables mark exactly one chosen limit.
for cmd in zeus-global zeus-per-stage; do
  [[ $(grep -c '^\* ' "$tmp/$cmd.txt") -eq 1 ]] || fail "$cmd: not one chosen row"
done

# EnvPipe on its own schedule: the plan JSON names the counts and is read back by plan evaluate.
"$perseus" baseline envpipe "${common[@]}" --policy greedy --schedule envelope \
  --out "$tmp/env.json" > "$tmp/env.txt"
grep -q '"schedule": "envelope:[0-9,]*"' "$tmp/env.json" || fail "envelope name not in plan JSON"
"$perseus" plan evaluate --profile "$tmp/p.csv" --plan "$tmp/env.json" --blocking-power 83.64 \
  > "$tmp/env.eval"
agree "$(value_of energy_j "$tmp/env.eval")" "$(value_of energy_j "$tmp/env.txt")" ||
  fail "envelope plan scores differently when read back"
"$perseus" baseline uniform "${common[@]}" --quiet > "$tmp/quiet.txt"
[[ ! -s $tmp/quiet.txt ]] || fail "--quiet printed output"

# --help lists the subcommands and their options.
out=$("$perseus" baseline --help)
for word in all-max uniform envpipe zeus-global zeus-per-stage; do
  [[ $out == *"$word"* ]] || fail "baseline --help lacks $word"
done
out=$("$perseus" baseline envpipe --help)
for word in --profile --stages --microbatches --blocking-power --schedule --out --quiet --policy \
  envelope; do
  [[ $out == *"$word"* ]] || fail "baseline envpipe --help lacks $word"
done
out=$("$perseus" baseline zeus-per-stage --help)
[[ $out == *--eta* && $out == *--step* ]] || fail "baseline zeus-per-stage --help lacks --eta/--step"

# --- bad inputs ---------------------------------------------------------------------------------
expect_error "--policy: unknown EnvPipe policy 'lazy'" baseline envpipe "${common[@]}" --policy lazy
expect_error "--eta must be in [0, 1]" baseline zeus-global "${common[@]}" --eta 1.5
expect_error "--eta" baseline zeus-per-stage "${common[@]}" --eta -0.1
expect_error "--step" baseline zeus-global "${common[@]}" --step 0
expect_error "--schedule: unknown schedule 'zigzag'" baseline all-max "${common[@]}" --schedule zigzag
expect_error "warm-up count 'x' is not a non-negative integer" \
  baseline uniform "${common[@]}" --schedule envelope:1,x,0,0
expect_error "has 2 warm-up counts but the pipeline has 4 stages" \
  baseline uniform "${common[@]}" --schedule envelope:1,2
expect_error "profile has 4 stages but the pipeline has 3" baseline uniform "${common[@]}" --stages 3
expect_error "--profile is required" baseline uniform --microbatches 6 --blocking-power 83.64
expect_error "--microbatches" baseline envpipe --profile "$tmp/p.csv" --blocking-power 83.64
expect_error "--blocking-power" baseline zeus-global --profile "$tmp/p.csv" --microbatches 6
expect_error "$tmp/missing.csv: cannot open" baseline uniform --profile "$tmp/missing.csv" \
  --microbatches 6 --blocking-power 83.64
# `plan evaluate` rejects a plan whose envelope name is malformed.
sed 's/"envelope:[0-9,]*"/"envelope:9"/' "$tmp/env.json" > "$tmp/bad.json"
expect_error "warm-up counts but the pipeline has 4 stages" \
  plan evaluate --profile "$tmp/p.csv" --plan "$tmp/bad.json" --blocking-power 83.64
echo "baseline CLI: ok"
