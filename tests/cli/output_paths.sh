#!/usr/bin/env bash
# Output files (issue 13): "-" is standard output; an existing symlink or FIFO is written
# through, never replaced by a regular file; a directory is an error.
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

synth() { "$perseus" profile synth --gpu a100 --stages 2 --out "$1" > "$tmp/said" 2>&1; }

"$perseus" profile synth --gpu a100 --stages 2 --out - > "$tmp/stdout.csv" 2> "$tmp/stderr"
"$perseus" profile check --profile "$tmp/stdout.csv" > /dev/null || fail "--out - did not print just the CSV"
grep -q "^wrote -: synthetic" "$tmp/stderr" || fail "the summary did not go to stderr"

synth "$tmp/real.csv"
ln -s "$tmp/real.csv" "$tmp/link.csv"
: > "$tmp/real.csv"
synth "$tmp/link.csv"
[[ -L $tmp/link.csv ]] || fail "the symlink was replaced"
[[ -s $tmp/real.csv ]] || fail "the symlink's target was not written"

mkfifo "$tmp/fifo"
cat "$tmp/fifo" > "$tmp/from_fifo" &
reader=$!
synth "$tmp/fifo"
wait $reader
[[ -p $tmp/fifo ]] || fail "the FIFO was replaced"
cmp -s "$tmp/from_fifo" "$tmp/real.csv" || fail "the FIFO's reader did not get the CSV"

mkdir "$tmp/dir"
expect_error "$tmp/dir: is a directory" profile synth --gpu a100 --stages 2 --out "$tmp/dir"
echo "output paths: ok"
