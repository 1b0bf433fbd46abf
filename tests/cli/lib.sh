# Helpers shared by the command-line tests (sourced, not run: ctest runs only the other scripts
# because this file's name is excluded in tests/CMakeLists.txt). Expects $perseus and $tmp.

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error EXPECTED ARGS...: runs perseus with ARGS; expects exit status 1, empty stdout and
# exactly one stderr line, starting with `perseus: error: ` and containing EXPECTED.
expect_error() {
  local expected=$1
  shift
  local rc=0
  "$perseus" "$@" > "$tmp/stdout" 2> "$tmp/stderr" || rc=$?
  [[ $rc -eq 1 ]] || fail "perseus $*: exit status $rc, expected 1: $(cat "$tmp/stderr")"
  [[ ! -s $tmp/stdout ]] || fail "perseus $*: unexpected stdout: $(cat "$tmp/stdout")"
  [[ $(wc -l < "$tmp/stderr") -eq 1 ]] || fail "perseus $*: not one line: $(cat "$tmp/stderr")"
  [[ $(head -c 16 "$tmp/stderr") == "perseus: error: " ]] ||
    fail "perseus $*: no 'perseus: error: ' prefix: $(cat "$tmp/stderr")"
  grep -qF -- "$expected" "$tmp/stderr" ||
    fail "perseus $*: '$expected' not in: $(cat "$tmp/stderr")"
}

# agree A B: succeeds when numbers A and B (both non-empty) agree to a relative 1e-6.
agree() {
  [[ -n $1 && -n $2 ]] || return 1
  awk -v a="$1" -v b="$2" 'BEGIN {
    d = a - b; if (d < 0) d = -d
    m = a < 0 ? -a : a; if (m < 1e-12) m = 1e-12
    exit !(d <= 1e-6 * m)
  }'
}

# value_of KEY FILE: the second word of the line whose first word is KEY (`key value` output).
value_of() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

# start_server PORT: starts `perseus serve` on PORT (0: any free port) with the store and output
# under $tmp, waits until it listens, and sets $server_pid and $url. The caller's EXIT trap
# should kill $server_pid.
start_server() {
  "$perseus" serve --port "$1" --store "$tmp/store.sqlite" --output-dir "$tmp/out" \
    --data-dir "$tmp" \
    > "$tmp/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    if grep -q listening "$tmp/server.log"; then
      url=$(grep -o 'http://[0-9.:]*' "$tmp/server.log")
      return
    fi
    sleep 0.05
  done
  fail "server did not start: $(cat "$tmp/server.log")"
}
