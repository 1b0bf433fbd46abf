#!/usr/bin/env bash
# A C++ training process whose GPU driver stops answering ends with its own exit code
# (tests/hung_driver/hung_driver_run.cpp): exit 0, no signal, the training loop never waited
# on the driver, and the client said once that it left the blocked call behind.
# Usage: bash check_exit.sh <hung_driver_run> <libnvidia-ml.so.1>
set -uo pipefail
run=$1 lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FAKE_NVML_HANG_FILE=$tmp/hang FAKE_NVML_REFRESH_MS=1 FAKE_NVML_READ_MS=0 \
  timeout 60 "$run" "$lib" >"$tmp/out" 2>"$tmp/err"
rc=$?
fail() { echo "FAIL: $*" >&2; cat "$tmp/out" "$tmp/err" >&2; exit 1; }
[[ $rc == 0 ]] || fail "hung_driver_run exited $rc (over 128: a signal, 124: timed out), not 0"
grep -q '^training ' "$tmp/out" || fail "no 'training' line"
grep -q '^close ' "$tmp/out" || fail "no 'close' line"
left=$(grep -c 'at exit, the GPU driver did not return from' "$tmp/out")
[[ $left == 1 ]] || fail "$left 'left behind' warnings, not 1"
grep -q 'within shutdown_bound_s = 0.5 s' "$tmp/out" || fail "the warning does not give the bound"
echo "ok: exit 0 with the driver hung; $(grep '^close ' "$tmp/out")"
