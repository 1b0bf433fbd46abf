#!/usr/bin/env bash
# Long-job benchmark of the control-plane server on loopback (issue 50.6): a frontier job, which
# never ends, of 64 ranks (8 stages x 8 pipelines) over many reporting windows, and one of 4096
# ranks (8 x 512) over fewer; each rank reports a result with a per-instruction breakdown every
# window (bench/load's client). Prints, per job, the server's RSS and the store's size (database
# and write-ahead log) once a tenth of the windows are done and at the end, their change, and
# how long a restart on the store took (start to listening: the job restored). Target: RSS and
# store flat within 10 %; restart under 1 s.
# Usage: bash bench/server_long_job_bench.sh [windows_64=5000] [windows_4096=200]
set -euo pipefail
source "$(dirname "$0")/load/prepare.sh"
windows_64=${1:-5000}
windows_4096=${2:-200}
work=$(mktemp -d)
server_pid=
trap 'kill $server_pid 2>/dev/null || true; rm -rf "$work"' EXIT

"$perseus" profile synth --gpu a100 --stages 8 --out "$work/profile.csv" >/dev/null
"$perseus" plan --profile "$work/profile.csv" --stages 8 --microbatches 4 \
  --blocking-power 83.64 --out "$work/frontier" --quiet
frequencies=$(/usr/bin/python3 -c "print(list(range(1410, 854, -15)))" | tr -d ' ')

start_server() {  # writes the seconds from start to listening to $work/started_s
  local begin
  begin=$(date +%s.%N)
  "$perseus" serve --port 0 --store "$work/store.sqlite" --output-dir "$work/out" \
    --data-dir "$work" --max-connections-per-peer 65536 --log-level warn \
    --scheduler frontier --scheduler-args "{\"frontier\": \"$work/frontier\", \"done_after\": 0}" \
    > "$work/server.log" 2>&1 &
  server_pid=$!
  until grep -q listening "$work/server.log"; do
    kill -0 $server_pid 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.01
  done
  /usr/bin/python3 -c "print($(date +%s.%N) - $begin)" > "$work/started_s"
}

port() { sed -nE 's/^listening on .*:([0-9]+) .*/\1/p' "$work/server.log"; }
rss_mb() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' /proc/$server_pid/status; }
store_mb() { du -cb "$work"/store.sqlite* | awk 'END {printf "%.2f", $1 / 1048576}'; }

# Samples RSS and store size when the job passes a tenth of its windows and at its end.
watch_job() {  # windows
  local tenth=$(($1 / 10)) round=-1
  while [ "$round" -lt "$tenth" ]; do
    round=$(curl -s "http://127.0.0.1:$(port)/jobs" |
      /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print(j[0]['round'] if j else -1)")
    sleep 0.2
  done
  echo "$round $(rss_mb) $(store_mb)" > "$work/early"
}

run_job() {  # ranks, windows
  local ranks=$1 windows=$2
  rm -rf "$work"/store.sqlite* "$work/out"
  start_server
  watch_job "$windows" &
  local watcher=$!
  timeout 1800 "$client" --port "$(port)" --jobs 1 --ranks "$ranks" --pp 8 --rounds "$windows" \
    --frequencies "$frequencies" --breakdown 4 > "$work/client.out"
  wait $watcher
  read -r early_round early_rss early_store < "$work/early"
  local end_rss end_store
  end_rss=$(rss_mb)
  end_store=$(store_mb)
  kill $server_pid
  wait $server_pid 2>/dev/null || true
  start_server
  local restart_s
  restart_s=$(cat "$work/started_s")
  local restored
  restored=$(curl -s "http://127.0.0.1:$(port)/jobs" |
    /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)[0]['round'])")
  kill $server_pid
  wait $server_pid 2>/dev/null || true
  echo "== frontier job, $ranks ranks, $windows windows"
  grep -E "^(run_s|requests_per_s|round_latency_p99_ms|failures)" "$work/client.out"
  /usr/bin/python3 - "$early_round" "$early_rss" "$end_rss" "$early_store" "$end_store" \
    "$restart_s" "$restored" <<'PY'
import sys
round_, rss0, rss1, store0, store1, restart, restored = sys.argv[1:]
rss0, rss1, store0, store1 = map(float, (rss0, rss1, store0, store1))
print(f"rss_mb at_round_{round_} {rss0:.1f} at_end {rss1:.1f} change {100 * (rss1 / rss0 - 1):+.1f} %")
print(f"store_mb at_round_{round_} {store0:.2f} at_end {store1:.2f} change {100 * (store1 / store0 - 1):+.1f} %")
print(f"restart_s {float(restart):.3f} (restored at round {restored})")
PY
}

run_job 64 "$windows_64"
run_job 4096 "$windows_4096"
