#!/usr/bin/env bash
# 43 mistakes of a new user, walked in one place (issue 51's acceptance: no silent acceptance): wrong
# units, truncated and damaged profiles, typos, conflicting options, outputs that cannot be
# written, a server that is not running, bad server configuration. Each is refused with exit
# status 1 and one line that names what is wrong and, where there is a likely cause, says it
# (expect_error); the few that are not errors (a truncated profile that still plans) say what
# they see. The detailed checks of each area live in their own scripts (plausibility.sh,
# plan_errors.sh, profile_errors.sh, did_you_mean.sh, emulate_cli.sh, report_outputs.sh) and in
# tests/server.
set -euo pipefail
perseus=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"
cd "$tmp"

"$perseus" profile synth --gpu a100 --stages 4 --out p.csv > /dev/null
"$perseus" plan --profile p.csv --microbatches 4 --blocking-power 83.64 --out-dir F --quiet
plan=(plan --profile p.csv --microbatches 4 --out-dir O)

# --- typos ---------------------------------------------------------------------------------------
expect_error "did you mean 'plan'?" plna
expect_error "did you mean '--profile'?" plan --profil p.csv
expect_error "--profile is required" plan --microbatches 4 --blocking-power 83
# --- units and numbers ---------------------------------------------------------------------------
expect_error "(in kilowatts? it is in watts: 70 W)" "${plan[@]}" --blocking-power 0.07
expect_error "--blocking-power is required and must be >= 0 watts" "${plan[@]}" --blocking-power -5
expect_error "--microbatches is required to plan and must be positive" plan --profile p.csv \
  --microbatches 0 --blocking-power 83 --out-dir O
expect_error "--microbatches = 2.5" plan --profile p.csv --microbatches 2.5 --blocking-power 83 \
  --out-dir O
expect_error "--unit-time must be a positive number of seconds" "${plan[@]}" --blocking-power 83 \
  --unit-time 0
expect_error "--schedule: unknown schedule 'bogus'" "${plan[@]}" --blocking-power 83 \
  --schedule bogus
expect_error "slowdown '0.02' is a percentage, so it would be 0.02 %; if you mean a fraction, write 2%" \
  plan export --frontier F --max-slowdown 0.02 --out-dir X
expect_error "(in milliwatts? it is in watts)" "${plan[@]}" --blocking-power 83640
awk -F, 'BEGIN { OFS = "," } NR > 1 { $3 = $3 * 1000 } { print }' p.csv > khz.csv
expect_error "khz.csv:2: field 'frequency': 1410000 MHz is outside 50..5000 MHz (clocks are in MHz)" \
  plan --profile khz.csv --microbatches 4 --blocking-power 83 --out-dir O
expect_error "p.csv: profile has 4 stages but the pipeline has 8 (--stages)" "${plan[@]}" \
  --blocking-power 83 --stages 8
# --- damaged profiles ----------------------------------------------------------------------------
expect_error "missing.csv: cannot open" plan --profile missing.csv --microbatches 4 \
  --blocking-power 83 --out-dir O
awk -F, 'BEGIN { OFS = "," } NR > 1 { t = $4; $4 = $5; $5 = t } { print }' p.csv > swapped.csv
expect_error "(time and energy columns swapped?" plan --profile swapped.csv --microbatches 4 \
  --blocking-power 83 --out-dir O
sed 's/^0,forward,1410,/0,forward,1410,-/' p.csv > negative.csv
expect_error "negative.csv:2: field 'time': must be a positive number of seconds" plan \
  --profile negative.csv --microbatches 4 --blocking-power 83 --out-dir O
sed '1s/energy/energi/' p.csv > header.csv
expect_error "header.csv:1: missing column 'energy'" plan --profile header.csv --microbatches 4 \
  --blocking-power 83 --out-dir O
{ cat p.csv; sed -n 2p p.csv; } > duplicate.csv
expect_error "duplicate row for stage 0 instruction 'forward' at 1410 MHz (also at line 2)" plan \
  --profile duplicate.csv --microbatches 4 --blocking-power 83 --out-dir O
: > empty.csv
expect_error "empty.csv: empty file" plan --profile empty.csv --microbatches 4 \
  --blocking-power 83 --out-dir O
# Cut in the middle of stage 0: it plans, and says what it planned and that clocks are missing.
head -c 3000 p.csv > truncated.csv
"$perseus" plan --profile truncated.csv --microbatches 4 --blocking-power 83 --out-dir T \
  > stdout 2>&1
grep -q "profile truncated.csv: 1 stage x forward/backward" stdout ||
  fail "a truncated profile's shape is not shown: $(cat stdout)"
grep -q "(a truncated profile, or a sweep that stopped early?)" stdout ||
  fail "a truncated profile's short clock set is not noted: $(cat stdout)"
# --- files and folders ---------------------------------------------------------------------------
touch a_file
expect_error "a_file: output path exists and is not a directory" plan --profile p.csv \
  --microbatches 4 --blocking-power 83 --out-dir a_file
expect_error "is a file; a frontier is the directory \`perseus plan\` wrote (here F)" plan export \
  --frontier F/frontier.csv --fastest --out-dir X
expect_error "choose exactly one of --index, --time, --max-slowdown, --fastest" plan export \
  --frontier F --out-dir X
expect_error "--schedule-file: nope.csv: cannot open" "${plan[@]}" --blocking-power 83 \
  --schedule-file nope.csv
expect_error "--out newdir/ names a folder; give the HTML file to write" report --profile p.csv \
  --blocking-power 83 --microbatches 4 --out newdir/
[[ ! -e newdir ]] || fail "report --out newdir/ made the folder before refusing"
expect_error "--measured: expected NAME=run.json, got 'run.json'" report --profile p.csv \
  --blocking-power 83 --microbatches 4 --measured run.json --out r/r.html
"$perseus" profile synth --gpu a100 --stages 2 --out p2.csv > /dev/null
"$perseus" plan export --frontier F --fastest --out-dir E > /dev/null
expect_error "the plan has 4 stages but profile p2.csv has 2" plan evaluate --profile p2.csv \
  --plan "$(ls E/*.json | head -1)" --blocking-power 83
# --- conflicting options -------------------------------------------------------------------------
expect_error "--microbatches 8 does not match frontier F (planned for 4 microbatches)" emulate \
  --profile p.csv --blocking-power 83 --frontier F --microbatches 8
expect_error "--stages 3 does not match frontier F (planned for 4 stages)" emulate \
  --profile p.csv --blocking-power 83 --frontier F --stages 3
expect_error "--tensor-parallel must be positive" report --profile p.csv --blocking-power 83 \
  --microbatches 4 --tensor-parallel 0 --out r/r.html
# --- the search database -------------------------------------------------------------------------
expect_error "1_3B" search --database "$data/aceso/miniset" --num-layers 24 --gpus-per-node 4 \
  --global-batch-size 512 --micro-batch-sizes 1,2 --memory-limit 12000 --model-size 1.3B \
  --out S
# --- the online loop -----------------------------------------------------------------------------
rc=0
"$perseus" simulate-training --server http://127.0.0.1:1 --microbatches 4 --blocking-power 83 \
  --iterations 2 > stdout 2> stderr || rc=$?
[[ $rc -eq 1 ]] || fail "simulate-training without a server: exit status $rc"
head -1 stderr | grep -q "rank 0: .*Connection refused (is \`perseus serve\` running at that address?)" ||
  fail "simulate-training without a server: the cause does not come first: $(cat stderr)"
grep -q "ranks 1-3: " stderr || fail "the other ranks' warnings are not one line: $(cat stderr)"
tail -1 stderr | grep -q "perseus: error: no iteration ran a schedule of the server" ||
  fail "simulate-training without a server: no error at the end: $(cat stderr)"
expect_error "--microbatches must be positive" simulate-training --server http://127.0.0.1:1 \
  --microbatches 0 --blocking-power 83 --iterations 2
expect_error "--server: server URL 'ftp://x': must start with http:// or https://" \
  simulate-training --server ftp://x --microbatches 4 --blocking-power 83 --iterations 2
# --- server configuration (its log's warnings, e.g. "no cluster token", left out) ----------------
expect_error "--port must be in 0..65535" serve --log-level error --port 70000
expect_error "--scheduler: unknown scheduler 'bogus'" serve --log-level error --store s.db --scheduler bogus
expect_error "--scheduler-args: invalid JSON at byte 3" serve --log-level error --store s.db --scheduler all-max \
  --scheduler-args '{not json'
expect_error "field 'max_slowdown': slowdown '0.02' is a percentage" serve --log-level error --store s.db \
  --scheduler frontier --scheduler-args '{"frontier": "F", "max_slowdown": 0.02}'
expect_error "--max-memory: xb unit not recognized" serve --log-level error --store s.db --max-memory 12XB
expect_error "--tls-cert and --tls-key go together: give both or neither" serve --log-level error --store s.db \
  --tls-cert c.pem
expect_error "--max-jobs must be >= 1" serve --log-level error --store s.db --max-jobs 0
expect_error "--token-file: cannot read missing.txt" serve --log-level error --store s.db --token-file missing.txt
ZEUS_PFO_SCHEDULER=Bogus expect_error "ZEUS_PFO_SCHEDULER: unknown scheduler 'Bogus'" serve \
  --log-level error --store s.db
echo ok
