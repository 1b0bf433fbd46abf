#!/usr/bin/env bash
# Bad inputs to `perseus plan`, `plan evaluate` and `plan export`: each exits 1 with exactly one
# line on stderr, `perseus: error: ...`, that names the offending file or option, and leaves no
# output (and no staging directory) behind.
# Usage: bash plan_errors.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/lib.sh"

# expect_no_output EXPECTED OUTPUT_PATH ARGS...: expect_error, and OUTPUT_PATH does not exist
# afterwards (and no *.partial-* anywhere under $tmp).
expect_no_output() {
  local expected=$1 output=$2
  shift 2
  expect_error "$expected" "$@"
  [[ ! -e $output ]] || fail "perseus $*: left $output behind"
  local left
  left=$(find "$tmp" -name '*.partial-*')
  [[ -z $left ]] || fail "perseus $*: left staging directories: $left"
}

"$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/p.csv" > /dev/null
bp=(--blocking-power 83.64)
common=(--profile "$tmp/p.csv" --stages 4 --microbatches 6 "${bp[@]}")
out=$tmp/out

# --- bad profiles (one class each), against a valid one-stage profile --------------------------
good=$'stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n0,forward,855,0.08,18
0,backward,1410,0.09,44\n0,backward,855,0.14,33\n'
printf '%s' "$good" > "$tmp/good.csv"
small=(--stages 1 --microbatches 2 "${bp[@]}")
"$perseus" plan --profile "$tmp/good.csv" "${small[@]}" --out "$tmp/G" --quiet ||
  fail "good.csv rejected"
[[ -f $tmp/G/meta.json ]] || fail "good.csv: no frontier"

cut -d, -f1-4 "$tmp/good.csv" > "$tmp/nocol.csv"
expect_no_output "$tmp/nocol.csv:1: missing column 'energy'" "$out" \
  plan --profile "$tmp/nocol.csv" "${small[@]}" --out "$out"
printf '%s0,forward,1005,abc,20\n' "$good" > "$tmp/nan.csv"
expect_no_output "$tmp/nan.csv:6: field 'time': not a number 'abc'" "$out" \
  plan --profile "$tmp/nan.csv" "${small[@]}" --out "$out"
printf '%s0,forward,1005,-0.06,20\n' "$good" > "$tmp/negative.csv"
expect_no_output "$tmp/negative.csv:6: field 'time'" "$out" \
  plan --profile "$tmp/negative.csv" "${small[@]}" --out "$out"
printf '%s0,backward,855,0.14,33\n' "$good" > "$tmp/dup.csv"
expect_no_output "$tmp/dup.csv:6: field 'frequency': duplicate row" "$out" \
  plan --profile "$tmp/dup.csv" "${small[@]}" --out "$out"
sed 's/^0,/2,/' "$tmp/good.csv" | tail -n +2 | cat "$tmp/good.csv" - > "$tmp/gap.csv"
expect_no_output "$tmp/gap.csv: field 'stage': stage 1 has no rows" "$out" \
  plan --profile "$tmp/gap.csv" --stages 3 --microbatches 2 "${bp[@]}" --out "$out"
printf '%s0,fwd,1005,0.06,20\n' "$good" > "$tmp/inst.csv"
expect_no_output "$tmp/inst.csv:6: field 'instruction': unknown instruction 'fwd'" "$out" \
  plan --profile "$tmp/inst.csv" "${small[@]}" --out "$out"
grep -v backward "$tmp/good.csv" > "$tmp/noback.csv"
expect_no_output "$tmp/noback.csv: no 'backward' rows for stage 0" "$out" \
  plan --profile "$tmp/noback.csv" "${small[@]}" --out "$out"
expect_no_output "$tmp/missing.csv: cannot open" "$out" \
  plan --profile "$tmp/missing.csv" "${small[@]}" --out "$out"
# Bad input does not create the output's parent directories either.
expect_no_output "$tmp/nan.csv:6:" "$tmp/sub" \
  plan --profile "$tmp/nan.csv" "${small[@]}" --out "$tmp/sub/dir/out"

# --- bad options ------------------------------------------------------------------------------
expect_no_output "$tmp/p.csv: profile has 4 stages but the pipeline has 3 (--stages)" "$out" \
  plan --profile "$tmp/p.csv" --stages 3 --microbatches 6 "${bp[@]}" --out "$out"
expect_no_output "--microbatches" "$out" \
  plan --profile "$tmp/p.csv" --stages 4 --microbatches 0 "${bp[@]}" --out "$out"
expect_no_output "--schedule: unknown schedule 'zigzag'" "$out" \
  plan "${common[@]}" --schedule zigzag --out "$out"
expect_no_output "--cost-model: unknown cost model 'cubic'" "$out" \
  plan "${common[@]}" --cost-model cubic --out "$out"
expect_no_output "--blocking-power" "$out" \
  plan --profile "$tmp/p.csv" --stages 4 --microbatches 6 --blocking-power -5 --out "$out"
expect_no_output "--unit-time" "$out" plan "${common[@]}" --unit-time 0 --out "$out"
expect_no_output "--noise-factor" "$out" plan "${common[@]}" --noise-factor 0.5 --out "$out"
expect_no_output "--threads must be >= 0" "$out" plan "${common[@]}" --threads -1 --out "$out"
# Parse errors (CLI11's) are one line too.
expect_no_output "Could not convert: --threads = abc" "$out" plan "${common[@]}" --threads abc \
  --out "$out"
expect_no_output "unknown option '--no-such-option' of 'perseus plan'" "$out" plan "${common[@]}" --no-such-option \
  --out "$out"
expect_no_output "--profile" "$out" plan --stages 4 --microbatches 6 "${bp[@]}" --out "$out"
expect_no_output "--out" "$out" plan "${common[@]}"

# --- unusable output locations ----------------------------------------------------------------
# (a path below a regular file: unwritable even for root)
echo data > "$tmp/afile"
expect_no_output "$tmp/afile" "$tmp/afile/out" plan "${common[@]}" --out "$tmp/afile/out"
[[ $(cat "$tmp/afile") == data ]] || fail "afile was changed"
expect_no_output "$tmp/afile: output path exists and is not a directory" "$tmp/none" \
  plan "${common[@]}" --out "$tmp/afile"
[[ $(cat "$tmp/afile") == data ]] || fail "afile was replaced"
mkdir "$tmp/results"
echo keep > "$tmp/results/notes.txt"
expect_no_output "$tmp/results: output directory is not empty and holds no meta.json" \
  "$tmp/results/meta.json" plan "${common[@]}" --out "$tmp/results"
[[ $(ls "$tmp/results") == notes.txt ]] || fail "results/ was changed"

# --- evaluate ---------------------------------------------------------------------------------
F=$tmp/F
E=$tmp/E
"$perseus" plan "${common[@]}" --out "$F" --quiet
"$perseus" plan export --frontier "$F" --index 0 --out "$E" > /dev/null
"$perseus" plan export --frontier "$F" --index 0 --format py --out "$E" > /dev/null
json=$E/plan_00000.json
py=$E/freqs_pipeline_00000.py
ev=(plan evaluate --profile "$tmp/p.csv" "${bp[@]}")
"${perseus}" "${ev[@]}" --plan "$json" > /dev/null || fail "evaluate of a good plan failed"

expect_no_output "$json: the plan is for 6 microbatches, not 5" "$tmp/none" \
  "${ev[@]}" --plan "$json" --microbatches 5
expect_no_output "$py: the plan is for 6 microbatches, not 5" "$tmp/none" \
  "${ev[@]}" --plan "$py" --microbatches 5
expect_no_output "$json: the plan is for the 1f1b schedule, not gpipe" \
  "$tmp/none" "${ev[@]}" --plan "$json" --schedule gpipe
# Every format of the same plan scores the same, with no schedule options: the list of clocks
# gives its microbatch count by its length, Zeus's pairs name every instruction.
"$perseus" plan export --frontier "$F" --index 0 --format zeus --out "$tmp/Z" > /dev/null
grep -q '^\[("forward", [0-9]*), ' "$tmp/Z/freqs_pipeline_00000.py" || fail "not Zeus pairs"
n=0
for plan in "$json" "$py" "$tmp/Z/freqs_pipeline_00000.py"; do
  n=$((n + 1))
  "$perseus" "${ev[@]}" --plan "$plan" | head -2 > "$tmp/score.$n"
done
[ "$(wc -l < "$tmp/score.1")" = 2 ] || fail "no score for the plan"
cmp -s "$tmp/score.1" "$tmp/score.2" || fail "the clock list scores differently"
cmp -s "$tmp/score.1" "$tmp/score.3" || fail "Zeus pairs score differently: $(cat "$tmp/score.3")"
# Defaults from the inputs: a plan JSON carries its blocking power (a list of clocks does not).
"$perseus" plan evaluate --profile "$tmp/p.csv" --plan "$json" | head -2 > "$tmp/score.own"
cmp -s "$tmp/score.1" "$tmp/score.own" || fail "the plan's own blocking power scores differently"
expect_no_output "--blocking-power is required (watts, >= 0) unless the plan JSON carries it" \
  "$tmp/none" plan evaluate --profile "$tmp/p.csv" --plan "$py"
expect_no_output "$tmp/Z/freqs_pipeline_00000.py: the plan is for the 1f1b schedule, not gpipe" \
  "$tmp/none" "${ev[@]}" --plan "$tmp/Z/freqs_pipeline_00000.py" --schedule gpipe
expect_no_output "--schedule: unknown schedule 'zigzag'" "$tmp/none" \
  "${ev[@]}" --plan "$py" --microbatches 6 --schedule zigzag
# A clock the profile does not have (every 990 MHz becomes 991 MHz).
sed 's/\b990\b/991/g' "$py" > "$tmp/wrong_clock.py"
cmp -s "$py" "$tmp/wrong_clock.py" && fail "the plan has no 990 MHz clock to change"
expect_no_output "$tmp/wrong_clock.py: plan rank" "$tmp/none" \
  "${ev[@]}" --plan "$tmp/wrong_clock.py" --microbatches 6
grep -q "991 MHz is not in profile $tmp/p.csv" "$tmp/stderr" || fail "$(cat "$tmp/stderr")"
sed 's/"frequency_mhz": 990\b/"frequency_mhz": 991/' "$json" > "$tmp/wrong_clock.json"
expect_no_output "$tmp/wrong_clock.json: plan rank" "$tmp/none" \
  "${ev[@]}" --plan "$tmp/wrong_clock.json"
# A plan for more stages than the profile has.
expect_no_output "$py: the plan has 4 stages but profile $tmp/good.csv has 1" "$tmp/none" \
  plan evaluate --profile "$tmp/good.csv" "${bp[@]}" --plan "$py" --microbatches 6
# Plans are data, never code.
echo "__import__('os').system('touch $tmp/pwned')" > "$tmp/evil.py"
expect_no_output "$tmp/evil.py:1: unknown plan format" "$tmp/pwned" \
  "${ev[@]}" --plan "$tmp/evil.py" --microbatches 6
printf '[[1410, 1395],\n [x]]\n' > "$tmp/x.py"
expect_no_output "$tmp/x.py:2: expected a clock in MHz" "$tmp/none" \
  "${ev[@]}" --plan "$tmp/x.py" --microbatches 6
printf '{"format": "perseus.plan/1", "schedule": "1f1b"}\n' > "$tmp/partial.json"
expect_no_output "$tmp/partial.json: field 'num_stages': missing" "$tmp/none" \
  "${ev[@]}" --plan "$tmp/partial.json"
expect_no_output "$tmp/nope.json: cannot open" "$tmp/none" "${ev[@]}" --plan "$tmp/nope.json"
expect_no_output "--blocking-power" "$tmp/none" \
  plan evaluate --profile "$tmp/p.csv" --blocking-power -1 --plan "$json"

# --- export -----------------------------------------------------------------------------------
n=$(($(wc -l < "$F/frontier.csv") - 1))
x=$tmp/X
expect_no_output "$F: --index: plan index $n out of range" "$x" \
  plan export --frontier "$F" --index "$n" --out "$x"
expect_no_output "--index: plan index -1 out of range" "$x" plan export --frontier "$F" --index -1 --out "$x"
expect_no_output "choose exactly one of --index, --time, --max-slowdown" "$x" \
  plan export --frontier "$F" --index 0 --time 5 --out "$x"
expect_no_output "choose exactly one of --index, --time, --max-slowdown" "$x" \
  plan export --frontier "$F" --time 5 --every 0.1 --out "$x"
expect_no_output "choose exactly one of --index, --time, --max-slowdown" "$x" \
  plan export --frontier "$F" --out "$x"
expect_no_output "$F: --time: no plan finishes within 0.5 s" "$x" \
  plan export --frontier "$F" --time 0.5 --out "$x"
expect_no_output "--time must be a positive" "$x" plan export --frontier "$F" --time -1 --out "$x"
expect_no_output "--max-slowdown: slowdown 'five' is not a percentage >= 0 (e.g. 5%)" "$x" \
  plan export --frontier "$F" --max-slowdown five --out "$x"
# The fastest plan is never slower than all-max (issue 16), so --max-slowdown 0 finds one; a
# frontier whose recorded all-max is faster than any of its plans (edited here) finds none.
"$perseus" plan export --frontier "$F" --max-slowdown 0 --out "$tmp/none-slower" > /dev/null ||
  fail "--max-slowdown 0 found no plan"
cp -r "$F" "$tmp/G"
/usr/bin/python3 - "$tmp/G/meta.json" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1]))
meta["all_max"]["time_s"] *= 0.5
json.dump(meta, open(sys.argv[1], "w"))
PY
expect_no_output "$tmp/G: --max-slowdown: no plan is within +0 % of all-max" "$x" \
  plan export --frontier "$tmp/G" --max-slowdown 0 --out "$x"
expect_no_output "--every must be a positive" "$x" plan export --frontier "$F" --every 0 --out "$x"
# A frontier's file for the frontier (issue 51.6: "meta.json: cannot open" before).
expect_no_output "frontier.csv: is a file; a frontier is the directory \`perseus plan\` wrote (here" \
  "$x" plan export --frontier "$F/frontier.csv" --index 0 --out "$x"
expect_no_output "--format must be json, py or zeus" "$x" \
  plan export --frontier "$F" --index 0 --format xml --out "$x"
expect_no_output "$tmp/results/meta.json: cannot open" "$x" \
  plan export --frontier "$tmp/results" --index 0 --out "$x"
expect_no_output "$tmp/afile" "$tmp/afile/x" \
  plan export --frontier "$F" --index 0 --out "$tmp/afile/x"
cp -r "$F" "$tmp/Fbad"
echo "perseus.plans/1 garbage" > "$tmp/Fbad/plans.txt"
expect_no_output "$tmp/Fbad/plans.txt:1: bad header" "$x" \
  plan export --frontier "$tmp/Fbad" --index 0 --out "$x"

# --- usage errors found by CLI11 (missing required options): non-zero exit ----------------------
"$perseus" plan evaluate --profile "$tmp/p.csv" "${bp[@]}" > /dev/null 2>&1 &&
  fail "evaluate without --plan succeeded"
"$perseus" plan export --frontier "$F" --index 0 > /dev/null 2>&1 &&
  fail "export without --out succeeded"
"$perseus" plan --no-such-option > /dev/null 2>&1 && fail "an unknown option was accepted"
echo "ok"
