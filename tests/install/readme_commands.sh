#!/usr/bin/env bash
# The README works as written after the install step it names (issue 13): installs the build
# into a temporary prefix (cmake --install) and the wheel into a temporary virtual environment
# (pip install --no-build-isolation, --system-site-packages), then runs the README's Quickstart as
# written (checking the saving it prints), and every other ```sh and ```python block of the guide
# (docs/usage.md) and of each page of docs/ (tests/install/doc_blocks.py), in order, each page in
# an empty directory, with only the prefix's `perseus` on PATH; the blocks marked fragment are
# checked instead. Python blocks run twice: with the wheel's interpreter and with Debian's
# python3 on the prefix's package. A command that ends in `&`
# runs in the background (waited for on its port when it is a server). Finally a C++ program
# is built against the installed client (find_package(perseus)) and run.
# Usage: readme_commands.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
cleanup() {
  jobs -p | xargs -r kill 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
[[ -x $prefix/bin/perseus ]] || fail "cmake --install did not install bin/perseus"
pydir=$(find "$prefix/lib" -maxdepth 3 -type d -name dist-packages | head -1)
[[ -f $pydir/perseus/__init__.py ]] || fail "cmake --install did not install the Python package"
[[ -f $prefix/share/doc/perseus/formats.md ]] || fail "cmake --install did not install docs/"
[[ -f $prefix/share/doc/perseus/LICENSE ]] || fail "cmake --install did not install the LICENSE"
[[ -s $prefix/share/bash-completion/completions/perseus ]] ||
  fail "cmake --install did not install the bash completion"
[[ -s $prefix/share/man/man1/perseus.1 ]] || fail "cmake --install did not install the man page"
"$prefix/bin/perseus" --help | tr '\n' ' ' | grep -q "installed in $prefix/share/doc/perseus:" ||
  fail "perseus --help does not point at the docs under --prefix $prefix"
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
# On a terminal (script(1) gives it one) the wheel's build says what it does and how far it got,
# though pip hides a build's output without -v.
script -qec "$(printf '%q ' "$tmp/venv/bin/pip" install --no-build-isolation --no-index -q "$src")" \
  "$tmp/pip.log" > /dev/null || fail "pip install of the wheel failed: $(tail -5 "$tmp/pip.log")"
grep -q "perseus: building the Python extension" "$tmp/pip.log" ||
  fail "the wheel's build said nothing on the terminal: $(tail -5 "$tmp/pip.log")"
/usr/bin/python3 - "$tmp/pip.log" << 'PY' || fail "the wheel's build progress is wrong: $(grep compiled "$tmp/pip.log")"
import re, sys
shown = [int(p) for p in re.findall(r"perseus: compiled (\d+) %", open(sys.argv[1]).read())]
assert shown == sorted(shown) and (not shown or shown[-1] == 100), shown
PY
(cd "$tmp" && "$tmp/venv/bin/python" -c "import perseus, perseus._perseus; print(perseus.__version__)") \
  > "$tmp/wheel_version"
[[ $(cat "$tmp/wheel_version") == "$("$prefix/bin/perseus" --version | awk '{print $2}')" ]] ||
  fail "the wheel's version $(cat "$tmp/wheel_version") differs from perseus --version"
# The wheel carries the command: its console script runs it, with its exit status.
[[ $("$tmp/venv/bin/perseus" --version) == "perseus $(cat "$tmp/wheel_version")" ]] ||
  fail "the wheel's perseus command does not run: $("$tmp/venv/bin/perseus" --version 2>&1)"
rc=0
"$tmp/venv/bin/perseus" plna > /dev/null 2> "$tmp/plna.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "did you mean 'plan'" "$tmp/plna.err" ||
  fail "the wheel's perseus command: 'perseus plna' exited $rc: $(cat "$tmp/plna.err")"

# The blocks to run, in order, per page (tests/install/doc_blocks.py): the README's Quickstart in
# blocks/quickstart/, the guide (docs/usage.md) in blocks/usage/, each other page of docs/ in its
# own; the fragments (```sh fragment ...) are checked against the installed command, package and
# headers.
/usr/bin/python3 "$src/tests/install/doc_blocks.py" extract "$src" "$tmp/blocks" > "$tmp/blocks.log" ||
  fail "$(cat "$tmp/blocks.log")"
for page in usage planning-from-python search synthetic-profiles; do
  [[ -d $tmp/blocks/$page ]] || fail "docs/$page.md has no runnable block"
done
(cd "$tmp" && PATH="$prefix/bin:$PATH" "$tmp/venv/bin/python" "$src/tests/install/doc_blocks.py" \
  fragments "$src" "$prefix/include") > "$tmp/fragments.log" 2>&1 || fail "$(cat "$tmp/fragments.log")"

work=$tmp/work
mkdir "$work"
cd "$work"
export PATH="$prefix/bin:$PATH"
[[ $(command -v perseus) == "$prefix/bin/perseus" ]] || fail "perseus on PATH is not the installed one"

# run_sh FILE: each command of the block (continuation lines joined), in this shell.
run_sh() {
  local command
  while IFS= read -r command; do
    [[ -z ${command// } ]] && continue
    echo "+ $command" >> "$tmp/commands.log"
    if [[ $command =~ \&[[:space:]]*$ ]]; then
      eval "$command" >> "$tmp/background.log" 2>&1
      wait_for_server "$command"
    else
      eval "$command" >> "$tmp/output.log" 2>&1 ||
        fail "README command failed: $command: $(tail -5 "$tmp/output.log")"
    fi
  done < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$1" | sed 's/[[:space:]]#[^"'"'"']*$//')
}

# A background `perseus serve --port P`: wait until it answers /healthz.
wait_for_server() {
  [[ $1 =~ serve.*--port[[:space:]]+([0-9]+) ]] || return 0
  local port=${BASH_REMATCH[1]}
  for _ in $(seq 100); do
    /usr/bin/python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/healthz', timeout=1)" \
      2> /dev/null && return 0
    sleep 0.1
  done
  fail "the server of '$1' did not come up: $(cat "$tmp/background.log")"
}

# The Quickstart, as written, in a directory of its own; it ends with the saving the server
# measured, which must be a saving at most the slowdown the plan was chosen for.
mkdir "$tmp/quickstart"
cd "$tmp/quickstart"
for block in "$tmp"/blocks/quickstart/*.sh; do run_sh "$block"; done
saving=$(grep -E "^server saving +[0-9.]+ %, time \+[0-9.]+ %" "$tmp/output.log") ||
  fail "the Quickstart printed no server saving: $(tail -5 "$tmp/output.log")"
/usr/bin/python3 - "$saving" << 'PY' || fail "the Quickstart's saving is not one: $saving"
import re, sys
energy, time = map(float, re.search(r"([0-9.]+) %, time \+([0-9.]+) %", sys.argv[1]).groups())
assert energy > 5 and time <= 2.0, (energy, time)
PY
wait  # the Quickstart stopped its server (kill %1)
cd "$work"

# run_page DIR: the page's blocks in order, in the current directory; Python blocks with the
# wheel's interpreter and with Debian's python3 on the prefix's package.
run_page() {
  local block
  for block in "$1"/*; do
    case $block in
      *.sh) run_sh "$block" ;;
      *.python)
        "$tmp/venv/bin/python" "$block" >> "$tmp/py_wheel.out" 2>&1 ||
          fail "Python block $block failed with the wheel: $(tail -5 "$tmp/py_wheel.out")"
        PYTHONPATH=$pydir /usr/bin/python3 "$block" >> "$tmp/py_prefix.out" 2>&1 ||
          fail "Python block $block failed with the installed package: $(tail -5 "$tmp/py_prefix.out")"
        ;;
    esac
  done
}
run_page "$tmp/blocks/usage"

# What the commands should have left behind.
[[ -s profile.csv && -f frontier/frontier.csv && -f report.html && -f sweep.csv ]] ||
  fail "the Usage commands left no profile, frontier, sweep or report: $(ls)"
grep -q '("forward", ' plans/freqs_pipeline_*.py || fail "the exported plan is not in Zeus's format"
/usr/bin/python3 - << 'PY' || fail "simulate-training did not run the served plan to its end"
import json
run = json.load(open("run.json"))
assert run["finished"] and "+PointSolution" in run["job_id"], run["job_id"]
assert run["final_schedule"]["iterations"] > 0 and not any(i["degraded"] for i in run["iterations"])
PY
for out in "$tmp/py_wheel.out" "$tmp/py_prefix.out"; do
  grep -q "round 0 degraded False" "$out" || fail "the Python block did not run a schedule: $(cat "$out")"
  grep -Eq "^plan [0-9]+: .* energy vs all-max$" "$out" ||
    fail "the Python planning block chose no plan: $(cat "$out")"
done
ls py_plans/plan_*.json > /dev/null 2>&1 || fail "the Python planning block exported no plan"

# Every other page with runnable blocks, each in a directory of its own; the planning page prints
# what it says it prints (its `# Frontier(...)` and `# plan N: ...` comments).
for page in "$tmp"/blocks/*/; do
  page=$(basename "$page")
  [[ $page == quickstart || $page == usage ]] && continue
  mkdir "$tmp/page-$page"
  (cd "$tmp/page-$page" && run_page "$tmp/blocks/$page")
done
grep -oE "# (Frontier\(.*\)|plan [0-9]+: .*)$" "$src/docs/planning-from-python.md" | cut -c3- |
  sort -u > "$tmp/planning.expected"
[[ $(wc -l < "$tmp/planning.expected") -ge 2 ]] || fail "docs/planning-from-python.md shows no output"
for out in "$tmp/py_wheel.out" "$tmp/py_prefix.out"; do
  grep -qvxFf "$out" "$tmp/planning.expected" &&
    fail "docs/planning-from-python.md says it prints $(grep -vxFf "$out" "$tmp/planning.expected" | head -1), $out does not"
done
[[ -f $tmp/page-search/search-out/best.json && -f $tmp/page-planning-from-python/plans/plan_00618.json ]] ||
  fail "docs/search.md or docs/planning-from-python.md left no result: $(ls "$tmp"/page-*)"

# The wheel plans as the installed command does: the planning tests (perseus.plan on a published
# profile against `perseus plan`), with the wheel's interpreter and the prefix's command.
(cd "$tmp" && PERSEUS_BIN=$prefix/bin/perseus "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$src/python/tests/test_planning.py") > "$tmp/planning_tests.log" 2>&1 ||
  fail "the planning tests failed with the wheel: $(tail -15 "$tmp/planning_tests.log")"
grep -q skipped "$tmp/planning_tests.log" &&
  fail "planning tests skipped with the wheel (no published profile?): $(tail -3 "$tmp/planning_tests.log")"
extension=$(cd "$tmp" && "$tmp/venv/bin/python" -c "import perseus._perseus as m; print(m.__file__)")
[[ $extension == "$tmp/venv/"* ]] || fail "the wheel's interpreter imports $extension, not the wheel's"

# A C++ program against the installed client.
cmake -S "$src/examples/cpp_client" -B "$tmp/cpp" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cpp.log" ||
  fail "find_package(perseus) failed: $(tail -5 "$tmp/cpp.log")"
cmake --build "$tmp/cpp" >> "$tmp/cpp.log" 2>&1 || fail "the example did not build: $(tail -5 "$tmp/cpp.log")"
"$tmp/cpp/train_loop" profile.csv > "$tmp/cpp.out" || fail "the C++ example failed"
[[ $(grep -c '^iteration ' "$tmp/cpp.out") -eq 4 ]] || fail "C++ example: $(cat "$tmp/cpp.out")"
echo "ok: $(grep -c '^+ ' "$tmp/commands.log") commands and $(ls "$tmp"/blocks/*/*.python | wc -l) Python blocks of README.md and docs/ run; $(cat "$tmp/fragments.log")"
