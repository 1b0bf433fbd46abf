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
echo "ok (screenshot $size bytes)"
