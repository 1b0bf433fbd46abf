#!/usr/bin/env bash
# `perseus plan` writes a frontier directory; `plan export` materializes plans from it (by index,
# time target and sampling interval, as plan JSON or list literal); `plan evaluate` scores them
# with the numbers frontier.csv reports. Both cost models and both schedules. Uses a synthesized
# profile, not the shared data.
# Usage: bash plan_frontier.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/lib.sh"

# Column $2 (1-based) of the row with index $1 in frontier.csv $3.
column_of() { awk -F, -v i="$1" -v c="$2" 'NR > 1 && $1 == i { print $c }' "$3"; }
# Checks that `perseus plan evaluate` output $1 matches row $2 of frontier.csv $3.
check_evaluation() {
  local t e
  t=$(value_of time_s "$1")
  e=$(value_of energy_j "$1")
  agree "$t" "$(column_of "$2" 4 "$3")" || fail "time_s $t != frontier.csv row $2 ($3)"
  agree "$e" "$(column_of "$2" 5 "$3")" || fail "energy_j $e != frontier.csv row $2 ($3)"
}
no_partials() {
  local left
  left=$(find "$tmp" -name '*.partial-*')
  [[ -z $left ]] || fail "staging directories left behind: $left"
}

"$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/p.csv" > /dev/null
common=(--profile "$tmp/p.csv" --stages 4 --microbatches 6 --blocking-power 83.64)

# --- plan -------------------------------------------------------------------------------------
F=$tmp/F
out=$("$perseus" plan "${common[@]}" --out "$F")
[[ $out == *" plans in "* && $out == *"wrote $F/{frontier.csv,plans.txt,meta.json}"* ]] ||
  fail "plan output: $out"
[[ $out == *all-max* && $out == *fastest* ]] || fail "plan prints no summary: $out"
[[ $(ls "$F") == $'frontier.csv\nmeta.json\nplans.txt' ]] || fail "frontier files: $(ls "$F")"
[[ $(head -1 "$F/frontier.csv") == \
  index,planned_time_s,predicted_energy_j,evaluated_time_s,evaluated_energy_j,pareto ]] ||
  fail "frontier.csv header"
# Pareto flags: a row is 1 exactly when no other row is at most as slow and as costly (and better
# in one, or an earlier duplicate).
awk -F, 'NR > 1 { t[NR] = $4; e[NR] = $5; p[NR] = $6 } END {
  for (i in t) { dom = 0
    for (j in t) if (j != i && t[j] <= t[i] && e[j] <= e[i] && (t[j] < t[i] || e[j] < e[i] || j < i)) dom = 1
    if (p[i] != !dom) { print "row " i - 2 " pareto " p[i]; exit 1 } } }' "$F/frontier.csv" ||
  fail "frontier.csv pareto column is not the Pareto set"
n=$(($(wc -l < "$F/frontier.csv") - 1))
((n > 10)) || fail "only $n plans"
# 4 stages x 6 microbatches x (forward + backward) = 48 clocks per plan.
[[ $(head -1 "$F/plans.txt") == "perseus.plans/1 $n 48" ]] || fail "plans.txt header"
[[ $(wc -l < "$F/plans.txt") -eq $((n + 1)) ]] || fail "plans.txt line count"
grep -q '"format": "perseus.frontier/1"' "$F/meta.json" || fail "meta.json format"
grep -q "\"num_plans\": $n," "$F/meta.json" || fail "meta.json num_plans"
no_partials

# Any number of threads writes the same frontier and plans, byte for byte.
"$perseus" plan "${common[@]}" --threads 3 --out "$tmp/F3" --quiet
for f in frontier.csv plans.txt; do cmp -s "$F/$f" "$tmp/F3/$f" || fail "--threads 3: $f differs"; done

# Planning again replaces the earlier frontier.
out=$("$perseus" plan "${common[@]}" --out "$F" --quiet)
[[ -z $out ]] || fail "--quiet printed: $out"
[[ $(($(wc -l < "$F/frontier.csv") - 1)) -eq $n ]] || fail "re-plan changed the frontier"

# --- export -----------------------------------------------------------------------------------
E=$tmp/E
out=$("$perseus" plan export --frontier "$F" --index 0 --out "$E")
[[ $out == "plan 0: "*" vs all-max -> $E/plan_00000.json"$'\n'"exported 1 plan to $E" ]] ||
  fail "export output: $out"
grep -q '"format": "perseus.plan/1"' "$E/plan_00000.json" || fail "plan_00000.json format"
grep -q '"schedule": "1f1b"' "$E/plan_00000.json" || fail "plan_00000.json schedule"
grep -q '"num_microbatches": 6' "$E/plan_00000.json" || fail "plan_00000.json microbatches"
[[ $(grep -c '"frequency_mhz"' "$E/plan_00000.json") -eq 48 ]] || fail "plan_00000.json clocks"
"$perseus" plan export --frontier "$F" --index 0 --format py --out "$E" > /dev/null
py=$E/freqs_pipeline_00000.py
[[ $(head -1 "$py") == "[" ]] || fail "list literal: $(head -2 "$py")"
[[ $(grep -c '^\[[0-9]' "$py") -eq 4 ]] || fail "list literal has not 4 stage lists"
[[ $(ls "$E") == $'freqs_pipeline_00000.py\nplan_00000.json' ]] || fail "export files: $(ls "$E")"
last=$((n - 1))
"$perseus" plan export --frontier "$F" --index "$last" --out "$E" > /dev/null
[[ -f $E/$(printf 'plan_%05d.json' "$last") ]] || fail "last plan not exported"

# --time T: the cheapest plan whose evaluated time is <= T (ties: the lowest index).
target=$(awk -F, 'NR > 1 { t[NR] = $4 } END { print t[int(NR / 2)] + 0.0005 }' "$F/frontier.csv")
want=$(awk -F, -v T="$target" 'NR > 1 && $4 <= T && (best == "" || $5 < e) { best = $1; e = $5 }
  END { print best }' "$F/frontier.csv")
"$perseus" plan export --frontier "$F" --time "$target" --out "$tmp/T" > /dev/null
[[ $(ls "$tmp/T") == "$(printf 'plan_%05d.json' "$want")" ]] ||
  fail "--time $target exported $(ls "$tmp/T"), expected plan $want"

# --every S: several distinct plans, each a different evaluated time.
span=$(awk -F, 'NR == 2 { lo = hi = $4 } NR > 1 { if ($4 < lo) lo = $4; if ($4 > hi) hi = $4 }
  END { print (hi - lo) / 4 }' "$F/frontier.csv")
out=$("$perseus" plan export --frontier "$F" --every "$span" --out "$tmp/S")
count=$(find "$tmp/S" -name 'plan_*.json' | wc -l)
((count >= 2 && count <= 5)) || fail "--every $span exported $count plans"
[[ $(tail -1 <<< "$out") == "exported $count plans to $tmp/S" ]] ||
  fail "export --every output: $out"
[[ $(grep -c "^plan [0-9]*: .* -> $tmp/S/plan_" <<< "$out") -eq $count ]] ||
  fail "export --every does not name each plan: $out"

# --max-slowdown P: the cheapest plan within (1 + P/100) x all-max's time (brute force here).
all_max=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['all_max']['time_s'])" \
  "$F/meta.json")
for pct in 1 5% 10 50; do
  bound=$(awk -v t="$all_max" -v p="${pct%\%}" 'BEGIN { printf "%.12g", t * (1 + p / 100) }')
  want=$(awk -F, -v T="$bound" 'NR > 1 && $4 <= T && (b == "" || $5 < e) { b = $1; e = $5 }
    END { print b }' "$F/frontier.csv")
  out=$("$perseus" plan export --frontier "$F" --max-slowdown "$pct" --out-dir "$tmp/MS$pct")
  [[ $(ls "$tmp/MS$pct") == "$(printf 'plan_%05d.json' "$want")" ]] ||
    fail "--max-slowdown $pct exported $(ls "$tmp/MS$pct"), expected plan $want"
  [[ $out == "plan $want: "*" % time, "*" % energy vs all-max -> "* ]] || fail "no echo: $out"
done

# --fastest: the least evaluated time (cheapest of equals); --min-energy: the least energy.
want=$(awk -F, 'NR > 1 && (b == "" || $4 < t || ($4 == t && $5 < e)) { b = $1; t = $4; e = $5 }
  END { print b }' "$F/frontier.csv")
"$perseus" plan export --frontier "$F" --fastest --out "$tmp/FA" > /dev/null
[[ $(ls "$tmp/FA") == "$(printf 'plan_%05d.json' "$want")" ]] ||
  fail "--fastest exported $(ls "$tmp/FA"), expected plan $want"
want=$(awk -F, 'NR > 1 && (b == "" || $5 < e) { b = $1; e = $5 } END { print b }' "$F/frontier.csv")
"$perseus" plan export --frontier "$F" --min-energy --out "$tmp/ME" > /dev/null
[[ $(ls "$tmp/ME") == "$(printf 'plan_%05d.json' "$want")" ]] ||
  fail "--min-energy exported $(ls "$tmp/ME"), expected plan $want"
times=$(for f in "$tmp"/S/plan_*.json; do
  i=$((10#$(basename "$f" .json | cut -d_ -f2)))
  column_of "$i" 4 "$F/frontier.csv"
done | sort -u | wc -l)
[[ $times -eq $count ]] || fail "--every exported plans with equal times"
"$perseus" plan export --frontier "$F" --every "$span" --format py --out "$tmp/S" > /dev/null
[[ $(find "$tmp/S" -name 'freqs_pipeline_*.py' | wc -l) -eq $count ]] || fail "--every --format py"

# --- evaluate ---------------------------------------------------------------------------------
"$perseus" plan evaluate --profile "$tmp/p.csv" --plan "$E/plan_00000.json" \
  --blocking-power 83.64 > "$tmp/ev_json"
check_evaluation "$tmp/ev_json" 0 "$F/frontier.csv"
for key in all_max_time_s all_max_energy_j energy_saving_percent slowdown_percent; do
  [[ -n $(value_of "$key" "$tmp/ev_json") ]] || fail "evaluate prints no $key"
done
"$perseus" plan evaluate --profile "$tmp/p.csv" --plan "$py" --microbatches 6 \
  --blocking-power 83.64 > "$tmp/ev_py"
cmp -s "$tmp/ev_json" "$tmp/ev_py" || fail "the .py plan evaluates differently from the JSON one"
for f in "$tmp"/T/*.json "$tmp"/S/*.json; do
  i=$((10#$(basename "$f" .json | cut -d_ -f2)))
  "$perseus" plan evaluate --profile "$tmp/p.csv" --plan "$f" --blocking-power 83.64 > "$tmp/ev"
  check_evaluation "$tmp/ev" "$i" "$F/frontier.csv"
done

# --- both cost models, both schedules -----------------------------------------------------------
for model in convex-hull exponential; do
  for schedule in 1f1b gpipe; do
    dir=$tmp/F-$model-$schedule
    "$perseus" plan "${common[@]}" --cost-model "$model" --schedule "$schedule" --out "$dir" \
      --quiet
    grep -q "\"cost_model\": \"$model\"" "$dir/meta.json" || fail "$dir: cost model"
    grep -q "\"schedule\": \"$schedule\"" "$dir/meta.json" || fail "$dir: schedule"
    m=$(($(wc -l < "$dir/frontier.csv") - 1))
    ((m > 1)) || fail "$dir: only $m plans"
    for i in 0 $((m / 2)) $((m - 1)); do
      "$perseus" plan export --frontier "$dir" --index "$i" --out "$dir-x" > /dev/null
      plan=$dir-x/$(printf 'plan_%05d.json' "$i")
      grep -q "\"schedule\": \"$schedule\"" "$plan" || fail "$plan: schedule"
      "$perseus" plan evaluate --profile "$tmp/p.csv" --plan "$plan" --blocking-power 83.64 \
        > "$tmp/ev"
      check_evaluation "$tmp/ev" "$i" "$dir/frontier.csv"
    done
  done
done
no_partials
echo "ok"
