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

# An output directory named like a file (--out is --out-dir's alias): refused before anything is
# made, in every command that writes one; an existing directory of that name is the user's.
plan=(plan --profile "$tmp/real.csv" --microbatches 4 --blocking-power 60 --quiet)
expect_error "'$tmp/frontier.csv' looks like a file name (.csv)" "${plan[@]}" --out "$tmp/frontier.csv"
[[ ! -e $tmp/frontier.csv ]] || fail "a refused --out-dir was made"
expect_error "looks like a file name (.json)" search --database "$tmp" --out "$tmp/s.json"
expect_error "looks like a file name (.txt)" export-job --store "$tmp/x.db" --job j --out "$tmp/j.txt"
mkdir "$tmp/kept.csv"
"$perseus" "${plan[@]}" --out "$tmp/kept.csv" || fail "an existing directory named *.csv was refused"
[[ -s $tmp/kept.csv/frontier.csv ]] || fail "no frontier in the existing directory"
echo "output paths: ok"
