#!/usr/bin/env bash
# The README works as written after the install step it names (issue 13): installs the build
# into a temporary prefix (cmake --install) and the wheel into a temporary virtual environment
# (pip install --no-build-isolation, --system-site-packages), then runs every ```sh and ```python
# block of the README's "Usage", "Control plane" and "Python" sections, in order, in an empty
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

# The README's blocks, as (kind, text) in order.
/usr/bin/python3 - "$src/README.md" "$tmp/blocks" << 'PY'
import pathlib, re, sys
text = pathlib.Path(sys.argv[1]).read_text()
out = pathlib.Path(sys.argv[2]); out.mkdir()
sections = re.split(r"^## ", text, flags=re.M)
wanted = ("Usage", "Control plane", "Python")
n = 0
for section in sections:
    if not section.startswith(wanted):
        continue
    for kind, body in re.findall(r"^```(sh|python)\n(.*?)^```", section, flags=re.M | re.S):
        n += 1
        (out / f"{n:02d}.{kind}").write_text(body)
assert n >= 3, f"only {n} runnable blocks found in the README's sections"
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

for block in "$tmp"/blocks/*; do
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
