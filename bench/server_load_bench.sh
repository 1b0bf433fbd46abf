#!/usr/bin/env bash
# Load benchmark of the control-plane server on loopback (issue 4): one job with 4096 ranks
# (8 stages x 512 pipelines) doing 20 schedule rounds, then 100 concurrent jobs of 8 ranks doing
# 20 rounds each. Every rank has its own connection; each round is "fetch schedule (barrier),
# report result". Prints barrier and round latency percentiles as the load generator sees them
# (including its own time to process thousands of answers on the same two cores), the server's
# share of each round (last request in -> every answer written), requests per second and the
# server's peak RSS. Target: p99 round latency under 100 ms at 4096 ranks. Each scenario runs
# without a token, with the cluster token and job secrets, and with those over TLS.
# Usage: bash bench/server_load_bench.sh [ranks=4096] [jobs=100] [security="open token tls"]
set -euo pipefail
source "$(dirname "$0")/load/prepare.sh"
ranks=${1:-4096}
jobs=${2:-100}
securities=${3:-open token tls}
work=$(mktemp -d)
trap 'kill $server_pid 2>/dev/null || true; rm -rf "$work"' EXIT

# 20 rounds: 19 all-max warm-up rounds, then the plan (8 stages, 4 microbatches, 8 instructions).
/usr/bin/python3 -c "print([[1410] * 8 for _ in range(8)])" > "$work/plan.py"
args="{\"solution_path\": \"$work/plan.py\", \"microbatches\": 4, \"warmup_rounds\": 19}"

echo "bench-token-$RANDOM$RANDOM$RANDOM$RANDOM" > "$work/token"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

run_scenario() {  # name, security (open|token|tls), load client arguments...
  local name=$1 security=$2
  shift 2
  local server_auth=() client_auth=() curl_token="" scheme=http
  if [ "$security" != open ]; then
    server_auth=(--token-file "$work/token")
    client_auth=(--token "$(cat "$work/token")")
    curl_token=$(cat "$work/token")
  fi
  if [ "$security" = tls ]; then
    server_auth+=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
    client_auth+=(--tls 1)
    scheme=https
  fi
  rm -f "$work"/store.sqlite*
  # Every emulated rank connects from 127.0.0.1: one peer address for the whole cluster.
  "$perseus" serve --port 0 --store "$work/store.sqlite" --output-dir "$work/out" --data-dir "$work" \
    --max-connections-per-peer 65536 \
    --scheduler point-solution --scheduler-args "$args" "${server_auth[@]}" \
    > "$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do grep -q listening "$work/server.log" && break; sleep 0.05; done
  local port
  port=$(sed -nE 's/^listening on .*:([0-9]+) .*/\1/p' "$work/server.log")
  local what="no token"
  [ "$security" = token ] && what="cluster token and job secrets"
  [ "$security" = tls ] && what="cluster token and job secrets over TLS"
  echo "== $name ($security: $what); deadlines on"
  timeout 300 "$client" --port "$port" "${client_auth[@]}" "$@"
  # The server's own share: from the last rank's request to every answer handed to the kernel.
  /usr/bin/python3 - "$scheme" "$port" "$curl_token" <<'PY'
import json, ssl, sys, urllib.request
base = f"{sys.argv[1]}://127.0.0.1:{sys.argv[2]}"
auth = {"Authorization": f"Bearer {sys.argv[3]}"} if sys.argv[3] else {}
unverified = ssl._create_unverified_context()  # the bench's own self-signed certificate
get = lambda path: json.load(urllib.request.urlopen(urllib.request.Request(base + path, headers=auth),
                                                    context=unverified))
times = sorted(t for job in get("/jobs") for t in get(f"/jobs/{job['job_id']}")["barrier_release_ms"])
pick = lambda p: times[min(len(times) - 1, int(p * (len(times) - 1) + 0.5))]
print(f"server_release_p50_ms {pick(0.50):.2f}")
print(f"server_release_p99_ms {pick(0.99):.2f}")
PY
  echo "server_peak_rss_mb $(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' /proc/$server_pid/status)"
  kill $server_pid
  wait $server_pid 2>/dev/null || true
}

for security in $securities; do
  run_scenario "one job, $ranks ranks" $security --jobs 1 --ranks "$ranks" --pp 8 --rounds 20
  run_scenario "$jobs concurrent jobs of 8 ranks" $security --jobs "$jobs" --ranks 8 --pp 8 \
    --rounds 20
done
