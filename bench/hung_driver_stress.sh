#!/usr/bin/env bash
# Issue 56's stress check: a training process whose GPU driver stops answering must end with its
# own exit code, never a signal. Runs each kind of process RUNS times, PARALLEL at a time, beside
# a CPU load (one busy loop per core), with core dumps on:
#   python        python/tests/workers/hung_driver_run.py, test_nvml.py's child (Debian's python3)
#   python-torch  the same with torch imported first (the project venv's python, its pinned torch)
#   cpp           tests/hung_driver/hung_driver_run.cpp (exit() with the client's threads blocked)
# Prints each kind's exit codes as counts ("0 x200" is the pass), keeps a failing run's output and
# core file under OUT, and exits 1 if any run failed. Progress on a terminal, quiet when piped.
# Usage: bench/hung_driver_stress.sh [RUNS=200] [PARALLEL=4] [OUT=a fresh temporary folder]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-200} parallel=${2:-4} out=${3:-$(mktemp -d)}
lib=$root/build/tests/libnvidia-ml.so.1
cpp=$root/build/tests/hung_driver_run
venv_python=${PERSEUS_VENV:-$root/.venv}/bin/python
for f in "$lib" "$cpp"; do
  [[ -x $f || -f $f ]] || { echo "missing $f: build first (bash scripts/build.sh)" >&2; exit 2; }
done
[[ -x $venv_python ]] || { echo "no project venv at $venv_python: run scripts/install-deps.sh" >&2; exit 2; }
mkdir -p "$out"

load=()
for _ in $(seq "$(nproc)"); do (while :; do :; done) & load+=($!); done
trap 'kill "${load[@]}" 2>/dev/null' EXIT

one() {  # kind, run number: one process in a folder of its own; the folder stays if it failed
  local kind=$1 dir=$out/$1/$2
  mkdir -p "$dir" && cd "$dir" || return
  ulimit -c unlimited
  local command=()
  case $kind in
    python) command=(/usr/bin/python3 "$root/python/tests/workers/hung_driver_run.py" hang "$lib") ;;
    python-torch) command=("$venv_python" "$root/python/tests/workers/hung_driver_run.py" hang "$lib" torch) ;;
    cpp) command=("$cpp" "$lib") ;;
  esac
  PYTHONPATH=$root/build/python FAKE_NVML_HANG_FILE=$dir/hang FAKE_NVML_REFRESH_MS=1 \
    FAKE_NVML_READ_MS=0 timeout 120 "${command[@]}" >out 2>err
  local rc=$?
  echo "$rc" >"$out/$kind.rc.$2"
  [[ $rc == 0 ]] && rm -rf "$dir"
}
export -f one
export root lib cpp venv_python out

failed=0
for kind in python python-torch cpp; do
  seq "$runs" | xargs -P "$parallel" -I{} bash -c "one $kind {}" 2>/dev/null &
  xargs_pid=$!
  while kill -0 $xargs_pid 2>/dev/null; do
    [[ -t 2 ]] && printf '\r%-13s %d/%d' "$kind" "$(ls "$out" | grep -c "^$kind\.rc\.")" "$runs" >&2
    sleep 1
  done
  [[ -t 2 ]] && printf '\r\033[K' >&2
  counts=$(cat "$out/$kind".rc.* | sort -n | uniq -c | awk '{printf "%s x%s  ", $2, $1}')
  printf '%-13s exit codes: %s\n' "$kind" "$counts"
  grep -qv '^0$' "$out/$kind".rc.* && failed=1
done
if ((failed)); then echo "FAILED: failing runs' output and cores are under $out" >&2; exit 1; fi
echo "all $((3 * runs)) runs exited 0"
rm -rf "$out"
