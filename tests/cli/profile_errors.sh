#!/usr/bin/env bash
# Bad profile inputs and bad synth arguments exit non-zero with a one-line error on stderr that
# names the file (and line and field where there is one).
# Usage: bash profile_errors.sh <perseus-binary> <shared-data-dir>
set -uo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/lib.sh"

good=$'stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n0,forward,855,0.08,18\n'
printf '%s' "$good" > "$tmp/good.csv"
"$perseus" profile check --profile "$tmp/good.csv" > /dev/null || fail "good.csv rejected"

printf '%s0,forward,1005,abc,20\n' "$good" > "$tmp/nan.csv"
expect_error "$tmp/nan.csv:4: field 'time': not a number 'abc'" profile check --profile "$tmp/nan.csv"

printf 'stage,instruction,frequency,time\n0,forward,1410,0.05\n' > "$tmp/nocol.csv"
expect_error "$tmp/nocol.csv:1: missing column 'energy'" profile check --profile "$tmp/nocol.csv"

printf '%s0,forward,1410,0.05,24\n' "$good" > "$tmp/dup.csv"
expect_error "$tmp/dup.csv:4: field 'frequency': duplicate row" profile check --profile "$tmp/dup.csv"

printf '%s2,forward,1410,0.05,24\n2,forward,855,0.08,18\n' "$good" > "$tmp/gap.csv"
expect_error "$tmp/gap.csv: field 'stage': stage 1 has no rows" profile check --profile "$tmp/gap.csv"

printf '%s0,fwd,1005,0.06,20\n' "$good" > "$tmp/inst.csv"
expect_error "$tmp/inst.csv:4: field 'instruction': unknown instruction 'fwd'" \
  profile check --profile "$tmp/inst.csv"

: > "$tmp/empty.csv"
expect_error "$tmp/empty.csv: empty file" profile check --profile "$tmp/empty.csv"
expect_error "$tmp/missing.csv: cannot open" profile check --profile "$tmp/missing.csv"

expect_error "unknown GPU model 'v100'" profile synth --gpu v100 --stages 2 --out "$tmp/x.csv"
expect_error "stage work needs one value per stage (3)" \
  profile synth --gpu a100 --stages 3 --stage-work 1,2 --out "$tmp/x.csv"
expect_error "$tmp/no/such/dir/x.csv: cannot open for writing" \
  profile synth --gpu a100 --stages 2 --out "$tmp/no/such/dir/x.csv"
[[ ! -e $tmp/x.csv ]] || fail "a failed synth left $tmp/x.csv behind"

# Missing required options are usage errors (CLI11): non-zero exit.
"$perseus" profile check > /dev/null 2>&1 && fail "check without --profile succeeded"
"$perseus" profile synth --gpu a100 > /dev/null 2>&1 && fail "synth without --stages succeeded"
echo "ok"
