#!/usr/bin/env bash
# --help works for `perseus profile` and both of its subcommands.
# Usage: bash profile_help.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1

fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$perseus" profile --help)
[[ $out == *synth* && $out == *check* ]] || fail "profile --help: $out"
out=$("$perseus" profile synth --help)
for option in --gpu --stages --stage-work --forward-time --noise --seed --out; do
  [[ $out == *"$option"* ]] || fail "profile synth --help lacks $option"
done
[[ $out == *"a100, h100, a40"* ]] || fail "profile synth --help does not list the GPUs"
out=$("$perseus" profile check --help)
[[ $out == *--profile* ]] || fail "profile check --help: $out"
echo "ok"
