#!/usr/bin/env bash
# `perseus report` writes the HTML page and one SVG per chart (next to the page or in --svg-dir),
# says where, and honours its options: an existing frontier, the plan shown in the timeline, a
# profile CSV, a list of slowdown factors. The page never references the network. Bad input is
# one `perseus: error:` line naming the option or file, and leaves no report behind.
# Usage: bash report_outputs.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

small=(--stages 4 --microbatches 4)

# --- embedded default ---------------------------------------------------------------------------
out=$("$perseus" report "${small[@]}" --out "$tmp/a/r.html")
[[ $out == "timeline: plan "*"vs all-max"$'\n'"wrote $tmp/a/r.html"$'\n'"wrote $tmp/a/frontier.svg"$'\n'"wrote $tmp/a/timeline.svg"$'\n'"wrote $tmp/a/sweep.svg"$'\n'"wrote $tmp/a/saving.svg" ]] ||
  fail "report output: $out"
html=$tmp/a/r.html
[[ $(grep -o 'http[^"]*' "$html" | sort -u) == "http://www.w3.org/2000/svg" ]] ||
  fail "the page references URLs: $(grep -o 'http[^"]*' "$html" | sort -u | tr '\n' ' ')"
! grep -qE '<script|<link|src=|href=|url\(|@import' "$html" || fail "the page loads resources"
[[ $(grep -o '<svg ' "$html" | wc -l) -eq 4 && $(grep -o '</svg>' "$html" | wc -l) -eq 4 ]] ||
  fail "the page has not four closed charts"
grep -q 'synthesized a100 (embedded default)' "$html" || fail "the page does not name the profile"
grep -q 'Timeline of Frontier plan #[0-9]* (fastest)' "$html" || fail "timeline is not the fastest"
for name in 'EnvPipe greedy' 'EnvPipe balanced' 'Zeus global' 'Zeus per-stage' 'Uniform'; do
  grep -q "$name" "$html" || fail "the page has no $name"
done
# 4 stages x 4 microbatches x (forward + backward) bars.
[[ $(grep -o 'class="entry[ "]' "$tmp/a/timeline.svg" | wc -l) -eq 32 ]] || fail "timeline bars"
grep -q 'class="entry critical"' "$tmp/a/timeline.svg" || fail "no critical path"
for f in frontier timeline sweep; do
  [[ $(head -c 5 "$tmp/a/$f.svg") == "<?xml" ]] || fail "$f.svg has no XML declaration"
done

# --quiet, --svg-dir, a comma list of factors (the sweep table shows each of them).
out=$("$perseus" report "${small[@]}" --factors 1,1.2,1.5 --out "$tmp/b/r.html" \
  --svg-dir "$tmp/b/svg" --quiet)
[[ -z $out ]] || fail "--quiet printed: $out"
[[ -s $tmp/b/r.html && -s $tmp/b/svg/sweep.svg && ! -e $tmp/b/sweep.svg ]] || fail "--svg-dir"
for f in 1.00 1.20 1.50; do grep -q "<td>$f</td>" "$tmp/b/r.html" || fail "no sweep row $f"; done

# --- an existing frontier, a profile CSV, the plan shown --------------------------------------------
"$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/p.csv" > /dev/null
"$perseus" plan --profile "$tmp/p.csv" "${small[@]}" --blocking-power 83.64 --out "$tmp/F" --quiet
"$perseus" report --profile "$tmp/p.csv" --frontier "$tmp/F" --index 0 --out "$tmp/c/r.html" \
  --quiet
grep -q 'Timeline of Frontier plan #0<' "$tmp/c/r.html" || fail "--index 0 is not shown"
# The user's cluster: --tensor-parallel defaults to 1, as in emulate cluster (issue 51.7: 8 here).
"$perseus" report --profile "$tmp/p.csv" --frontier "$tmp/F" --index 0 --pipelines 4 \
  --out "$tmp/e/r.html" --quiet
grep -qF "4 data-parallel pipelines x 4 stages x 1-way tensor parallelism = 16 GPUs" \
  "$tmp/e/r.html" || fail "--pipelines 4 without --tensor-parallel is not 1-way"
"$perseus" emulate cluster --frontier "$tmp/F" --pipelines 4 --factors 1.1 > "$tmp/e/cluster"
grep -qF "x 1-way tensor parallel = 16 GPUs" "$tmp/e/cluster" ||
  fail "emulate cluster: $(cat "$tmp/e/cluster")"
grep -q ">$tmp/F<" "$tmp/c/r.html" || fail "the page does not name the frontier"
# --time T: the cheapest plan within T seconds (here: all of them).
cheapest=$(awk -F, 'NR > 1 && (best == "" || $5 < e) { best = $1; e = $5 } END { print best }' \
  "$tmp/F/frontier.csv")
"$perseus" report --frontier "$tmp/F" --time 100 --out "$tmp/d/r.html" --quiet
grep -q "Timeline of Frontier plan #$cheapest<" "$tmp/d/r.html" ||
  fail "--time 100 does not show the cheapest plan #$cheapest"
"$perseus" report --profile "$tmp/p.csv" --blocking-power 83.64 --microbatches 4 \
  --out "$tmp/e/r.html" --quiet
grep -q ">$tmp/p.csv<" "$tmp/e/r.html" || fail "the page does not name the profile CSV"

# --measured NAME=FILE: a simulate-training run's final schedule, else its last window, is shown.
printf '{"last_window": {"mean_time_s": 1.2, "mean_energy_j": 900}, "final_schedule": null}\n' \
  > "$tmp/run.json"
"$perseus" report "${small[@]}" --measured "my run=$tmp/run.json" --out "$tmp/m/r.html" --quiet
grep -q "my run" "$tmp/m/r.html" || fail "--measured: the page does not show the run"
grep -q "energy from the GPUs" "$tmp/m/r.html" || fail "--measured: a real run's energy"
# A simulate-training run ("gpus": "simulated") is marked: its energy is the simulator's own.
printf '{"gpus": "simulated", "final_schedule": {"mean_time_s": 1.1, "mean_energy_j": 800}}\n' \
  > "$tmp/sim.json"
"$perseus" report "${small[@]}" --measured "my run=$tmp/run.json" --measured "sim=$tmp/sim.json" \
  --out "$tmp/s/r.html" --quiet
grep -q "simulated GPUs, true energy: $tmp/sim.json" "$tmp/s/r.html" ||
  fail "--measured: a simulated run is not marked"
grep -q "true energy, not a counter" "$tmp/s/r.html" || fail "--measured: simulated energy not said"
if grep -q "energy from the GPUs" "$tmp/s/r.html"; then
  fail "--measured: simulated energies called the counters'"
fi

# --- errors ---------------------------------------------------------------------------------------
mkdir "$tmp/dir"
expect_error "--blocking-power is required with --profile" report --profile "$tmp/p.csv" \
  --out "$tmp/x/r.html"
expect_error "--gpu" report --gpu nope --out "$tmp/x/r.html"
expect_error "--gpu" report --profile "$tmp/p.csv" --gpu a100 --blocking-power 80 \
  --out "$tmp/x/r.html"
expect_error "--factors" report --factors 0.5:1:0.1 --out "$tmp/x/r.html"
expect_error "--factors" report --factors 1,x --out "$tmp/x/r.html"
expect_error "--eta" report --eta 2 --out "$tmp/x/r.html"
expect_error "--pipelines must be positive" report --pipelines 0 --out "$tmp/x/r.html"
expect_error "--index" report "${small[@]}" --index 100000 --out "$tmp/x/r.html"
expect_error "give at most one of --index, --time" report --index 1 --time 3 \
  --out "$tmp/x/r.html"
expect_error "$tmp/nope" report --frontier "$tmp/nope" --out "$tmp/x/r.html"
expect_error "--microbatches 7 does not match frontier $tmp/F" report --frontier "$tmp/F" \
  --microbatches 7 --out "$tmp/x/r.html"
expect_error "frontier $tmp/F has 4 stages but profile synthesized a100 (embedded default) with --stages 3" \
  report --frontier "$tmp/F" --stages 3 --out "$tmp/x/r.html"
expect_error "--stages 3 does not match profile $tmp/p.csv" report --profile "$tmp/p.csv" \
  --stages 3 --blocking-power 80 --out "$tmp/x/r.html"
expect_error "--out $tmp/dir names a folder; give the HTML file to write" report --out "$tmp/dir"
# A folder that does not exist yet is refused before any work, and not made (issue 51.7).
expect_error "--out $tmp/newdir/ names a folder; give the HTML file to write, e.g. $tmp/newdir/report.html" \
  report --out "$tmp/newdir/"
[[ ! -e $tmp/newdir ]] || fail "report made the folder it refused"
expect_error "--schedule" report --schedule zigzag --out "$tmp/x/r.html"
measured_error() {  # expected message, run file contents
  printf '%s\n' "$2" > "$tmp/bad.json"
  expect_error "$tmp/bad.json$1" report "${small[@]}" --measured "r=$tmp/bad.json" \
    --out "$tmp/x/r.html"
}
measured_error ":2: invalid JSON at byte 3: syntax error while parsing object key" '{'
measured_error ": field 'final_schedule.mean_time_s': must be a number, got \"1.2\"" \
  '{"final_schedule": {"mean_time_s": "1.2", "mean_energy_j": 900}}'
measured_error ": field 'last_window.mean_energy_j': must be a finite number >= 0, got -900" \
  '{"last_window": {"mean_time_s": 1.2, "mean_energy_j": -900}}'
measured_error ": field 'last_window.mean_energy_j': missing" '{"last_window": {"mean_time_s": 1}}'
measured_error ": no final_schedule or last_window" '{"final_schedule": null}'
measured_error ": must be a JSON object" '[1, 2]'
expect_error "--measured: expected NAME=run.json" report --measured "$tmp/run.json" \
  --out "$tmp/x/r.html"
[[ ! -e $tmp/x ]] || fail "a failed report left $(ls -R "$tmp/x")"
echo "ok"
