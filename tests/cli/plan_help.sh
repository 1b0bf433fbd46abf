#!/usr/bin/env bash
# --help works for `perseus plan` and both of its subcommands, lists their options, and writes
# nothing.
# Usage: bash plan_help.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

cd "$tmp"
out=$("$perseus" plan --help)
for word in --profile --stages --microbatches --blocking-power --unit-time --cost-model \
  --schedule --noise-factor --out --quiet evaluate export convex-hull exponential 1f1b gpipe envelope; do
  [[ $out == *"$word"* ]] || fail "plan --help lacks $word: $out"
done
out=$("$perseus" plan evaluate --help)
for option in --profile --plan --blocking-power --schedule --microbatches; do
  [[ $out == *"$option"* ]] || fail "plan evaluate --help lacks $option: $out"
done
out=$("$perseus" plan export --help)
for option in --frontier --index --time --every --format --out; do
  [[ $out == *"$option"* ]] || fail "plan export --help lacks $option: $out"
done
# --help wins over missing required options and writes no files.
"$perseus" plan --help --stages 4 > /dev/null
"$perseus" plan export --help --index 0 > /dev/null
[[ -z $(ls -A "$tmp") ]] || fail "--help wrote files: $(ls -A "$tmp")"
# Required options are marked one way in every command's help (issue 51.7): "(required)" at the
# end of the description, whether CLI11 or the command checks them, never CLI11's "REQUIRED".
for command in "plan" "plan evaluate" "plan export" "simulate-training" "emulate" "profile synth" \
  "baseline zeus-global" "search" "serve export-job"; do
  # shellcheck disable=SC2086
  out=$("$perseus" $command --help)
  [[ $out != *REQUIRED* ]] || fail "$command --help marks options REQUIRED: $out"
done
grep -q -- "--profile TEXT .*(required)" <<< "$("$perseus" plan --help)" ||
  fail "plan --help does not mark --profile (required)"
grep -q -- "--server TEXT .*(required)" <<< "$("$perseus" simulate-training --help)" ||
  fail "simulate-training --help does not mark --server (required)"
echo "ok"
