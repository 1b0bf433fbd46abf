#!/usr/bin/env bash
# `perseus report` from the embedded default (small sizes), opened in Debian's headless Chromium
# through Selenium (tests/browser/check_report.py): the page loads without console errors or
# network requests, every chart has drawn elements, the tables have rows, and a full-page
# screenshot is a real PNG. Fails (does not skip) when chromium, chromium-driver or
# python3-selenium is missing: scripts/install-deps.sh installs them.
# Set PERSEUS_REPORT_SCREENSHOT=path.png to keep the screenshot.
# Usage: bash report_browser.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$here/lib.sh"

install_hint="install them with scripts/install-deps.sh (Debian: chromium chromium-driver python3-selenium)"
for tool in /usr/bin/python3 /usr/bin/chromium /usr/bin/chromedriver; do
  [[ -x $tool ]] || fail "$tool is missing; $install_hint"
done
/usr/bin/python3 -c 'import selenium' 2> /dev/null || fail "python3-selenium is missing; $install_hint"

report=$tmp/report/report.html
"$perseus" report --microbatches 6 --out "$report" --quiet
for f in report.html frontier.svg timeline.svg sweep.svg saving.svg; do
  [[ -s $tmp/report/$f ]] || fail "report wrote no $f"
done
# Well-formed XML, HTML page included (it is written as XHTML-compatible markup).
/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; [E.parse(f) for f in sys.argv[1:]]' \
  "$tmp"/report/*.html "$tmp"/report/*.svg || fail "report output is not well-formed"

screenshot=${PERSEUS_REPORT_SCREENSHOT:-$tmp/screenshot.png}
/usr/bin/python3 "$here/../browser/check_report.py" "$report" "$screenshot" ||
  fail "the browser check of $report failed"
[[ -f $screenshot ]] || fail "no screenshot at $screenshot"
size=$(stat -c %s "$screenshot")
((size > 10240)) || fail "screenshot is only $size bytes"
[[ $(head -c 8 "$screenshot" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
  fail "screenshot is not a PNG"

# "Your plan": the commands the box gives, run as written (but the server), export the plan the
# report shows, with the time and energy it shows.
chosen=$tmp/chosen/report.html
"$perseus" report --microbatches 6 --max-slowdown 2% --out "$chosen" --quiet
/usr/bin/python3 "$here/../browser/check_report.py" "$chosen" "$tmp/chosen.png" ||
  fail "the browser check of $chosen failed"
/usr/bin/python3 - "$chosen" "$tmp/steps.sh" << 'PY'
import html, pathlib, re, sys
page = pathlib.Path(sys.argv[1]).read_text()
steps = html.unescape(re.search(r'<pre class="commands">(.*?)</pre>', page, re.S).group(1))
pathlib.Path(sys.argv[2]).write_text("\n".join(
    line for line in steps.splitlines() if not line.startswith("perseus serve")) + "\n")
PY
grep -q 'within +2 % of all-max' "$chosen" || fail "'Your plan' does not say how it was chosen"
mkdir "$tmp/steps"
(cd "$tmp/steps" && PATH="$(dirname "$perseus"):$PATH" bash -e "$tmp/steps.sh" > steps.log) ||
  fail "the 'Your plan' commands failed: $(cat "$tmp/steps.sh")"
index=$(grep -o 'Your plan: Frontier plan #[0-9]*' "$chosen" | grep -o '[0-9]*$')
exported=$tmp/steps/plans/$(printf 'plan_%05d.json' "$index")
[[ -f $exported ]] || fail "the 'Your plan' commands did not export plan $index"
time_shown=$(grep -o 'against all-max ([0-9,.]* J and [0-9.]* s' "$chosen" | grep -o '[0-9.]* s$')
time_exported=$(grep -o "plan $index: [0-9.]* s" "$tmp/steps/steps.log" | awk '{printf "%.4f s", $3}')
[[ $time_exported == "$time_shown" ]] ||
  fail "the exported plan $index takes ${time_exported:-nothing}, the report shows $time_shown"

# A measured profile (the instruction profiler's error columns): the page also says how well it
# was measured, and gives each Perseus saving its standard error.
"$perseus" profile synth --gpu a100 --stages 4 --out "$tmp/synth.csv" > /dev/null
awk -F, -v OFS=, 'NR == 1 {print $0, "energy_stderr", "energy_pooling_error"; next}
  {print $0, 0.004, $1 != 3 ? 0 : $2 == "forward" ? 0.08 : 0.05}' "$tmp/synth.csv" > "$tmp/measured.csv"
measured=$tmp/measured/report.html
"$perseus" report --profile "$tmp/measured.csv" --blocking-power 83.64 --microbatches 6 \
  --out "$measured" --quiet
/usr/bin/python3 "$here/../browser/check_report.py" "$measured" "$tmp/measured.png" ||
  fail "the browser check of $measured failed"
grep -q '<li>Measured profile: energy standard error: median 0.40 %, worst 0.40 %' "$measured" ||
  fail "the measured profile's report does not state its standard error"
grep -q 'only the sum is measured, not each energy, of stage 3 forward (' "$measured" ||
  fail "the measured profile's report does not name the pooled rows"
grep -q 'every instruction at its lowest-energy clock; saving ± [0-9.]* points (std. error)' \
  "$measured" || fail "the measured profile's report gives the Uniform baseline no standard error"
grep -Eq '>[0-9.]+ ± [0-9.]+ % at [-+0-9.]+ % time<' "$tmp/measured/saving.svg" &&
  grep -q '<path class="pooling-bound"' "$tmp/measured/saving.svg" ||
  fail "the measured profile's saving chart gives no standard error and pooling bound"
echo "ok (screenshot $size bytes; measured profile's report checked)"
