#!/usr/bin/env bash
# Wrong units are refused (issue 13): a profile in milliseconds, in kilojoules or millijoules, in
# kHz, and a blocking power in milliwatts or kilowatts each get one line naming the row or the
# option and the likely mistake, from every command that reads them; --allow-implausible lets
# the user insist. A truncated profile is shown for what it is.
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

"$perseus" profile synth --gpu a100 --stages 2 --out "$tmp/p.csv" > /dev/null
# scale COLUMN FACTOR OUT: the profile with one column multiplied.
scale() {
  awk -F, -v c="$1" -v f="$2" 'BEGIN { OFS = "," } NR > 1 { $c = $c * f } { print }' \
    "$tmp/p.csv" > "$tmp/$3"
}
scale 4 1000 ms.csv     # time in milliseconds
scale 5 0.001 kj.csv    # energy in kilojoules
scale 5 1000 mj.csv     # energy in millijoules
scale 3 1000 khz.csv    # clocks in kHz
bp=(--blocking-power 83.64)
# Time and energy values swapped under their headers (issue 51.6: only the symptom was named).
awk -F, 'BEGIN { OFS = "," } NR > 1 { t = $4; $4 = $5; $5 = t } { print }' "$tmp/p.csv" \
  > "$tmp/swapped.csv"
expect_error "(time and energy columns swapped? as written the row draws" \
  profile check --profile "$tmp/swapped.csv"

expect_error "ms.csv:2: field 'energy': average power" profile check --profile "$tmp/ms.csv"
grep -qF "time in milliseconds, or energy in kilojoules?" "$tmp/stderr" || fail "no hint: $(cat "$tmp/stderr")"
grep -qF -- "--allow-implausible uses it anyway" "$tmp/stderr" || fail "no override named"
expect_error "kj.csv:2: field 'energy'" profile check --profile "$tmp/kj.csv"
expect_error "energy in millijoules" profile check --profile "$tmp/mj.csv"
expect_error "khz.csv:2: field 'frequency': 1410000 MHz is outside 50..5000 MHz" \
  profile check --profile "$tmp/khz.csv"

# Every command that reads a profile refuses it, before any work.
expect_error "ms.csv:2: field 'energy'" plan --profile "$tmp/ms.csv" --microbatches 4 "${bp[@]}" \
  --out-dir "$tmp/F"
[[ ! -e $tmp/F ]] || fail "plan wrote output for an implausible profile"
expect_error "ms.csv:2" emulate --profile "$tmp/ms.csv" --microbatches 4 "${bp[@]}"
expect_error "ms.csv:2" baseline all-max --profile "$tmp/ms.csv" --microbatches 4 "${bp[@]}"
expect_error "ms.csv:2" report --profile "$tmp/ms.csv" "${bp[@]}" --out "$tmp/r/r.html"

# Blocking power in milliwatts.
for cmd in "profile check --profile $tmp/p.csv" "emulate --profile $tmp/p.csv --microbatches 4" \
  "plan --profile $tmp/p.csv --microbatches 4 --out-dir $tmp/F"; do
  # shellcheck disable=SC2086
  expect_error "--blocking-power: 83640 W is above the highest instruction power" \
    $cmd --blocking-power 83640
  grep -qF "(in milliwatts? it is in watts)" "$tmp/stderr" || fail "no hint: $(cat "$tmp/stderr")"
  # ... and in kilowatts (issue 51.6: 0.07 was planned as 0.07 W).
  # shellcheck disable=SC2086
  expect_error "--blocking-power: 0.07 W is below what any GPU draws while it waits (in kilowatts?" \
    $cmd --blocking-power 0.07
done

# A profile truncated at a line boundary (issue 51.6: it planned 1 stage of 2 without a word):
# `plan` says the profile's shape, and `plan` and `profile check` note the short clock set.
head -60 "$tmp/p.csv" > "$tmp/cut.csv"
"$perseus" plan --profile "$tmp/cut.csv" --microbatches 4 "${bp[@]}" --out-dir "$tmp/Fcut" \
  > "$tmp/out"
grep -qF "profile $tmp/cut.csv: 1 stage x forward/backward x 21..38 clocks" "$tmp/out" ||
  fail "plan did not say the profile's shape: $(cat "$tmp/out")"
for cmd in "plan --profile $tmp/cut.csv --microbatches 4 ${bp[*]} --out-dir $tmp/Fcut2" \
  "profile check --profile $tmp/cut.csv"; do
  # shellcheck disable=SC2086
  "$perseus" $cmd > "$tmp/out"
  grep -qF "note: stage 0 backward has 21 clocks (1410..1110 MHz); the most is 38" "$tmp/out" ||
    fail "$cmd: no note of the short clock set: $(cat "$tmp/out")"
done

# --allow-implausible: the user insists, and the command runs.
"$perseus" profile check --profile "$tmp/ms.csv" --allow-implausible > "$tmp/out"
grep -q "valid profile" "$tmp/out" || fail "--allow-implausible: $(cat "$tmp/out")"
"$perseus" emulate --profile "$tmp/p.csv" --microbatches 4 --blocking-power 83640 \
  --allow-implausible > "$tmp/out" || fail "--allow-implausible did not let emulate run"
grep -q "^energy" "$tmp/out" || fail "emulate printed no energy"
echo ok
