#!/usr/bin/env bash
# The search's shipped database (issue 52.2): data/search/gpt_1_3B_a100 is what
# scripts/make_search_db.sh writes (byte for byte), the guide's search example (docs/usage.md,
# "Parallelization search") runs on it as written and prints the table the guide shows, and bad
# generator options are one-line errors.
# Usage: bash search_shipped_db.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$here/lib.sh"

bash "$root/scripts/make_search_db.sh" "$perseus" "$tmp/db" > /dev/null
diff -r "$tmp/db" "$root/data/search/gpt_1_3B_a100" > "$tmp/diff" ||
  fail "data/search/gpt_1_3B_a100 is not what scripts/make_search_db.sh writes: $(head -5 "$tmp/diff")"

# The guide's example (a fragment there: it needs the checkout), as written, from a directory
# where data/ is the repository's.
/usr/bin/python3 - "$root/docs/usage.md" "$tmp" << 'PY'
import pathlib, re, sys
section = re.split(r"^## ", pathlib.Path(sys.argv[1]).read_text(), flags=re.M)
(search,) = [s for s in section if s.startswith("Parallelization search")]
blocks = re.findall(r"^```(sh|text)(?: fragment)?\n(.*?)^```", search, flags=re.M | re.S)
assert [kind for kind, _ in blocks[:2]] == ["sh", "text"], blocks
out = pathlib.Path(sys.argv[2])
(out / "example.sh").write_text(blocks[0][1].replace("\\\n", " "))
(out / "expected.txt").write_text(blocks[1][1])
PY
mkdir "$tmp/run"
ln -s "$root/data" "$tmp/run/data"
(cd "$tmp/run" && PATH="$(dirname "$perseus"):$PATH" bash -e "$tmp/example.sh" > output.txt 2>&1) ||
  fail "the guide's search example failed: $(tail -5 "$tmp/run/output.txt")"
# Every row of the guide's table but the timing column, as printed.
while IFS= read -r line; do
  expected=$(awk '{NF = NF - (/^[0-9]/ ? 1 : 0); print}' <<< "$line")
  awk '{NF = NF - (/^[0-9]/ ? 1 : 0); print}' "$tmp/run/output.txt" | grep -qxF -- "$expected" ||
    fail "the guide's search example no longer prints '$expected': $(cat "$tmp/run/output.txt")"
done < "$tmp/expected.txt"
[[ -f $tmp/run/search-out/best.json ]] || fail "the example wrote no search-out/best.json"

expect_error "unknown GPU model" search synth-db --gpu x100 --out-dir "$tmp/x"
expect_error "unknown GPT size '7B'" search synth-db --model-size 7B --out-dir "$tmp/x"
expect_error "microbatch size 0 is not in 1..1024" search synth-db --micro-batch-sizes 0 \
  --out-dir "$tmp/x"
echo ok
