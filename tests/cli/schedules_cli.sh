#!/usr/bin/env bash
# Every pipeline schedule through the command line (issue 15): a profile split into virtual
# stages and input/weight backwards; plan, export, evaluate and emulate on interleaved 1F1B,
# looped BFS, interleaved zero bubble, ZBV and DualPipeV agree with the frontier; a schedule file
# in PyTorch's notation plans exactly like the generator it was written from; bad schedule input
# gets one-line errors. Uses a synthesized profile, not the shared data.
# Usage: bash schedules_cli.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

# 4 GPUs, 8 stages: a 4-stage synthetic profile cut into 2 virtual stages each, backward split.
"$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/p4.csv" > /dev/null
"$perseus" profile split --profile "$tmp/p4.csv" --virtual-stages 2 --split-backward \
  --out "$tmp/p8.csv" > "$tmp/split"
grep -q "8 stages x forward/backward/backward_input/backward_weight" "$tmp/split" ||
  fail "split: $(cat "$tmp/split")"
# The split keeps every stage's total: stage 0's forward at 1410 MHz is half of the original's.
orig=$(awk -F, '$1 == 0 && $2 == "forward" && $3 == 1410 { print $4 }' "$tmp/p4.csv")
half=$(awk -F, '$1 == 1 && $2 == "forward" && $3 == 1410 { print $4 * 2 }' "$tmp/p8.csv")
agree "$orig" "$half" || fail "virtual stage time $half != $orig"
# synth does the same in one step.
"$perseus" profile synth --gpu a100 --stages 4 --virtual-stages 2 --split-backward \
  --out "$tmp/s8.csv" > /dev/null
cmp -s "$tmp/p8.csv" "$tmp/s8.csv" || fail "synth --virtual-stages differs from profile split"

common=(--profile "$tmp/p8.csv" --microbatches 8 --blocking-power 83.64)
for sched in interleaved-1f1b looped-bfs interleaved-zero-bubble zbv dualpipev; do
  "$perseus" plan "${common[@]}" --schedule "$sched" --out "$tmp/f-$sched" --quiet
  grep -q '"stages_per_rank": 2' "$tmp/f-$sched/meta.json" || fail "$sched: stages_per_rank"
  # The fastest plan: exported, evaluated and emulated, it is what frontier.csv says.
  "$perseus" plan export --frontier "$tmp/f-$sched" --fastest --out "$tmp/x-$sched" > "$tmp/exp"
  plan_file=$(ls "$tmp/x-$sched"/plan_*.json)
  i=$((10#$(basename "$plan_file" .json | sed 's/plan_//')))
  want_t=$(awk -F, -v i=$i 'NR > 1 && $1 == i { print $4 }' "$tmp/f-$sched/frontier.csv")
  want_e=$(awk -F, -v i=$i 'NR > 1 && $1 == i { print $5 }' "$tmp/f-$sched/frontier.csv")
  "$perseus" plan evaluate --profile "$tmp/p8.csv" --plan "$plan_file" > "$tmp/ev"
  agree "$(value_of time_s "$tmp/ev")" "$want_t" || fail "$sched: evaluate time $(cat "$tmp/ev")"
  agree "$(value_of energy_j "$tmp/ev")" "$want_e" || fail "$sched: evaluate energy"
  "$perseus" emulate --profile "$tmp/p8.csv" --frontier "$tmp/f-$sched" --index "$i" \
    --timeline "$tmp/t.csv" > "$tmp/em"
  grep -q "8 stages on 4 GPUs" "$tmp/em" || fail "$sched: $(head -1 "$tmp/em")"
  agree "$(awk '$1 == "iteration" { print $3 }' "$tmp/em")" "$want_t" || fail "$sched: emulate"
  # The timeline has one row per action of the schedule and both stages of GPU 0.
  actions=$("$perseus" schedule --schedule "$sched" --stages 8 --microbatches 8 2> /dev/null |
    tr ',' '\n' | wc -l)
  [[ $(($(wc -l < "$tmp/t.csv") - 1)) -eq $actions ]] || fail "$sched: timeline rows"
  [[ $(awk -F, 'NR > 1 && $1 == 0 { print $3 }' "$tmp/t.csv" | sort -u | wc -l) -eq 2 ]] ||
    fail "$sched: GPU 0 does not run two stages"
done
# V-shaped schedules put stage 7 on GPU 0, looped ones stage 4.
awk -F, 'NR > 1 && $1 == 0 && $3 == 7 { found = 1 } END { exit !found }' "$tmp/t.csv" ||
  fail "dualpipev: stage 7 not on GPU 0"

# A schedule file written from a generator plans exactly as the generator does.
"$perseus" schedule --schedule zbv --stages 8 --microbatches 8 --out "$tmp/zbv.csv" > /dev/null
[[ $(wc -l < "$tmp/zbv.csv") -eq 4 ]] || fail "schedule CSV rows"
head -1 "$tmp/zbv.csv" | grep -q '^0F0,0F1,' || fail "schedule CSV: $(head -1 "$tmp/zbv.csv")"
"$perseus" plan --profile "$tmp/p8.csv" --blocking-power 83.64 --schedule-file "$tmp/zbv.csv" \
  --out "$tmp/f-file" --quiet
cmp -s "$tmp/f-file/frontier.csv" "$tmp/f-zbv/frontier.csv" || fail "file frontier differs"
grep -q '"schedule": "zbv.csv"' "$tmp/f-file/meta.json" || fail "file schedule name"
# The frontier carries the file's actions: export and emulate need no file.
"$perseus" plan export --frontier "$tmp/f-file" --min-energy --out "$tmp/x-file" > /dev/null
"$perseus" emulate --profile "$tmp/p8.csv" --frontier "$tmp/f-file" --fastest > /dev/null
# Report: one lane per GPU, no EnvPipe for a V-shaped schedule.
"$perseus" report --profile "$tmp/p8.csv" --frontier "$tmp/f-zbv" --out "$tmp/r.html" > /dev/null
grep -q "GPU 0 (0,7)" "$tmp/r.html" || fail "report timeline lanes"
! grep -q "EnvPipe greedy" "$tmp/r.html" || fail "EnvPipe in a zbv report"
# Baselines that apply to every schedule.
for b in all-max uniform zeus-global zeus-per-stage; do
  "$perseus" baseline "$b" "${common[@]}" --schedule interleaved-1f1b > "$tmp/b" ||
    fail "baseline $b: $(cat "$tmp/b")"
done

# Bad schedule input: one line naming the problem.
expect_error "schedule 'zbv' runs exactly 2 stage(s) per rank, not 3 (--virtual-stages)" \
  plan "${common[@]}" --schedule zbv --virtual-stages 3 --out "$tmp/none"
expect_error "7 stages do not split into ranks of 2 stages each" \
  schedule --schedule interleaved-1f1b --stages 7 --microbatches 8
expect_error "rounds" plan --profile "$tmp/p8.csv" --blocking-power 83.64 \
  --schedule interleaved-1f1b --microbatches 9 --out "$tmp/none"
expect_error "give --schedule-file or --schedule/--virtual-stages, not both" \
  plan "${common[@]}" --schedule zbv --schedule-file "$tmp/zbv.csv" --out "$tmp/none"
expect_error "zbv.csv: the schedule runs 8 microbatches, not 6 (--microbatches)" \
  plan --profile "$tmp/p8.csv" --blocking-power 83.64 --microbatches 6 \
  --schedule-file "$tmp/zbv.csv" --out "$tmp/none"
expect_error "zbv.csv: the schedule has 8 stages but the profile has 4" \
  plan --profile "$tmp/p4.csv" --blocking-power 83.64 --schedule-file "$tmp/zbv.csv" \
  --out "$tmp/none"
sed '1s/0F1/0X1/' "$tmp/zbv.csv" > "$tmp/bad.csv"
expect_error "bad.csv: rank 0 item 2: '0X1' is not an action in PyTorch's notation" \
  schedule --schedule-file "$tmp/bad.csv"
sed '1s/,0F1,/,/' "$tmp/zbv.csv" > "$tmp/missing.csv"
expect_error "missing.csv: schedule 'missing.csv': no forward of stage 0 microbatch 1" \
  schedule --schedule-file "$tmp/missing.csv"
expect_error "no 'backward_input' rows for stage 3, which the zbv schedule needs (\`perseus profile split --split-backward\` derives them)" \
  plan --profile "$tmp/p4.csv" --blocking-power 83.64 --schedule zbv --microbatches 8 \
  --out "$tmp/none"
expect_error "schedule 'zbv' runs exactly 2 stage(s) per rank, not 3 (--virtual-stages)" \
  simulate-training "${common[@]}" --schedule zbv --virtual-stages 3 \
  --server http://127.0.0.1:1 --iterations 1
expect_error "EnvPipe does not apply to the zbv schedule" \
  baseline envpipe "${common[@]}" --schedule zbv
expect_error "Zeus's pair lists name one stage per GPU" \
  plan export --frontier "$tmp/f-zbv" --fastest --format zeus --out "$tmp/none"
expect_error "--virtual-stages must be at least 1" \
  profile split --profile "$tmp/p4.csv" --virtual-stages 0 --out "$tmp/none.csv"
expect_error "--input-fraction must be between 0 and 1" \
  profile split --profile "$tmp/p4.csv" --split-backward --input-fraction 1.5 --out "$tmp/none.csv"
expect_error "already has backward_input rows" \
  profile split --profile "$tmp/p8.csv" --split-backward --out "$tmp/none.csv"
echo "schedules_cli: ok"
