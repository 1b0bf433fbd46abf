#!/usr/bin/env bash
# The README works as written after the install step it names (issue 13): installs the build
# into a temporary prefix (cmake --install) and the wheel into a temporary virtual environment
# (pip install --no-build-isolation, --system-site-packages), then runs the README's Quickstart as
# written (checking the saving it prints), and every ```sh and ```python block of the guide's
# (docs/usage.md) "Usage", "Control plane" and "Python" sections, in order, in an empty
# directory, with only the prefix's `perseus` on PATH. Python blocks run twice: with the wheel's
# interpreter and with Debian's python3 on the prefix's package. A command that ends in `&`
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
"$tmp/venv/bin/pip" install --no-build-isolation --no-index -q "$src" > "$tmp/pip.log" 2>&1 ||
  fail "pip install of the wheel failed: $(tail -5 "$tmp/pip.log")"
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

# The blocks to run, as (kind, text) in order: the README's Quickstart (blocks/quickstart/), then
# the guide's "Usage", "Control plane" and "Python" sections (blocks/guide/).
/usr/bin/python3 - "$src" "$tmp/blocks" << 'PY'
import pathlib, re, sys
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for name, path, wanted in (("quickstart", src / "README.md", ("Quickstart",)),
                           ("guide", src / "docs" / "usage.md",
                            ("Usage", "Control plane", "Python"))):
    (out / name).mkdir(parents=True)
    n = 0
    for section in re.split(r"^## ", path.read_text(), flags=re.M):
        if not section.startswith(wanted):
            continue
        for kind, body in re.findall(r"^```(sh|python)\n(.*?)^```", section, flags=re.M | re.S):
            n += 1
            (out / name / f"{n:02d}.{kind}").write_text(body)
    assert n >= 1 if name == "quickstart" else n >= 3, f"only {n} runnable blocks in {path}"
PY

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

for block in "$tmp"/blocks/guide/*; do
  case $block in
    *.sh) run_sh "$block" ;;
    *.python)
      "$tmp/venv/bin/python" "$block" >> "$tmp/py_wheel.out" 2>&1 ||
        fail "README Python block failed with the wheel: $(tail -5 "$tmp/py_wheel.out")"
      PYTHONPATH=$pydir /usr/bin/python3 "$block" >> "$tmp/py_prefix.out" 2>&1 ||
        fail "README Python block failed with the installed package: $(tail -5 "$tmp/py_prefix.out")"
      ;;
  esac
done

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

# A C++ program against the installed client.
cmake -S "$src/examples/cpp_client" -B "$tmp/cpp" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cpp.log" ||
  fail "find_package(perseus) failed: $(tail -5 "$tmp/cpp.log")"
cmake --build "$tmp/cpp" >> "$tmp/cpp.log" 2>&1 || fail "the example did not build: $(tail -5 "$tmp/cpp.log")"
"$tmp/cpp/train_loop" profile.csv > "$tmp/cpp.out" || fail "the C++ example failed"
[[ $(grep -c '^iteration ' "$tmp/cpp.out") -eq 4 ]] || fail "C++ example: $(cat "$tmp/cpp.out")"
echo "ok: $(grep -c '^+ ' "$tmp/commands.log") README commands and $(ls "$tmp"/blocks/*.python | wc -l) Python block(s)"
