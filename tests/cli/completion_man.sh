#!/usr/bin/env bash
# The bash completion and the man page (issue 52.4), generated from the command line's own
# definitions: completing in a real bash offers the subcommands and options of the words typed
# so far (and files after an option that takes a value); the man page renders in groff without a
# warning and has a section for every subcommand, listing each of its options.
# Usage: bash completion_man.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

"$perseus" completion bash > "$tmp/perseus.bash"
# complete_words WORD...: what completing the last word offers, one per line.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=(perseus "$@"); COMP_CWORD=$#; _perseus 2> /dev/null
           printf "%s\n" "${COMPREPLY[@]}"' _ "$tmp/perseus.bash" "$@"
}
offers() {  # offers EXPECTED WORD...: completing WORD... offers EXPECTED
  local expected=$1
  shift
  complete_words "$@" | grep -qx -- "$expected" ||
    fail "completing 'perseus $*' does not offer $expected: $(complete_words "$@" | tr '\n' ' ')"
}
offers plan pl
offers profile pro
offers export plan ex
offers --profile plan --pro
offers --frontier plan export --fr
offers --max-slowdown plan export --frontier F --max
offers --until-done simulate-training --un
offers --json profile check --j
[[ -z $(complete_words plan --profile "") ]] ||
  fail "after --profile (a file) completion offers words, not files: $(complete_words plan --profile '')"
[[ -z $(complete_words plan export --zz) ]] || fail "completion offers words for an unknown option"
expect_error "only bash is supported" completion zsh

"$perseus" man > "$tmp/perseus.1"
groff -man -Tutf8 -ww -z "$tmp/perseus.1" 2> "$tmp/groff.err" || fail "groff failed on the man page"
[[ ! -s $tmp/groff.err ]] || fail "groff warns about the man page: $(head -5 "$tmp/groff.err")"
groff -man -Tutf8 "$tmp/perseus.1" 2> /dev/null | sed 's/.\x08//g' > "$tmp/man.txt"
for command in "profile synth" "plan export" "emulate cluster" "serve" "simulate-training" \
  "search grid" "gpu probe" "report"; do
  grep -q "^   perseus $command\$" "$tmp/man.txt" || fail "the man page has no section perseus $command"
done
grep -q -- "--max-slowdown VALUE" "$tmp/man.txt" || fail "the man page lacks --max-slowdown"
grep -q -- "--until-done" "$tmp/man.txt" || fail "the man page lacks --until-done"
echo ok
