#!/usr/bin/env bash
# `perseus profile synth` writes a profile that `perseus profile check` accepts; the shared
# reference profiles pass `check` too.
# Usage: bash profile_synth_check.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/a100.csv")
[[ $out == *"wrote $tmp/a100.csv"* ]] || fail "synth output: $out"
[[ $out == *"--blocking-power 83.64"* ]] || fail "synth does not print the blocking power: $out"
[[ $(wc -l < "$tmp/a100.csv") -eq $((1 + 4 * 2 * 38)) ]] || fail "a100.csv has the wrong row count"
[[ $(head -1 "$tmp/a100.csv") == "stage,instruction,frequency,time,energy" ]] || fail "header"

out=$("$perseus" profile check --profile "$tmp/a100.csv")
[[ $out == *"stages: 4"* ]] || fail "check output: $out"
[[ $out == *"38 clocks (1410..855 MHz)"* ]] || fail "check output: $out"

# Custom stage work, forward time and seeded noise: deterministic for a seed.
args=(profile synth --gpu h100 --stages 3 --stage-work 1,1.2,1.4 --forward-time 0.02
      --noise 0.02 --seed 9)
"$perseus" "${args[@]}" --out "$tmp/h1.csv" > /dev/null
"$perseus" "${args[@]}" --out "$tmp/h2.csv" > /dev/null
cmp -s "$tmp/h1.csv" "$tmp/h2.csv" || fail "same seed gave different profiles"
"$perseus" profile check --profile "$tmp/h1.csv" | grep -q "66 clocks (1980..1005 MHz)" ||
  fail "h100 profile summary"
# The file is replaced in place, no temporary files left behind.
"$perseus" profile synth --gpu a40 --stages 2 --out "$tmp/h1.csv" > /dev/null
[[ $(ls "$tmp") == $'a100.csv\nh1.csv\nh2.csv' ]] || fail "unexpected files: $(ls "$tmp")"

if [[ -d $data/perseus ]]; then
  for f in gpt3-175b+a100_sxm_bf16.csv bloom+a40_bf16.csv; do
    "$perseus" profile check --profile "$data/perseus/stage_profiles/$f" | grep -q "stages: 8" ||
      fail "check $f"
  done
else
  echo "shared data not found at $data: skipping the reference profiles"
fi
echo "ok"
