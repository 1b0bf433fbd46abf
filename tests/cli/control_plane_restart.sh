#!/usr/bin/env bash
# A real pipeline job (perseus simulate-training: one client process per rank) keeps running
# while the server is killed with SIGKILL and restarted on the same store: the clients retry,
# the job continues from its stored rounds and finishes, and the store holds every round's
# results from every rank.
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
server_pid=
trap 'kill $server_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

# A fixed port, so the clients find the server again after the restart.
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_server "$port"
/usr/bin/python3 -c "print([[1410] * 8 for _ in range(4)])" > "$tmp/plan.py"
rounds=120
"$perseus" simulate-training --server "http://127.0.0.1:$port" --stages 4 --microbatches 4 \
  --blocking-power 83.64 --report-every 1 --until-done --quiet --out "$tmp/run.json" \
  --scheduler point-solution --scheduler-args \
  "{\"solution_path\": \"$tmp/plan.py\", \"microbatches\": 4, \"warmup_rounds\": $((rounds - 1))}" \
  2> "$tmp/clients.log" &
run_pid=$!
# Kill the server once the job is a few rounds in, then restart it.
for _ in $(seq 200); do
  round=$(/usr/bin/python3 - "$port" <<'PY' 2>/dev/null || echo -1
import json, sys, urllib.request
jobs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/jobs"))
print(jobs[0]["round"] if jobs else -1)
PY
)
  ((round >= 5)) && break
  sleep 0.02
done
((round >= 5)) || fail "job did not get going (round $round)"
kill -9 $server_pid
wait $server_pid 2>/dev/null || true
sleep 0.3
start_server "$port"
grep -q "1 job(s) restored" "$tmp/server.log" || fail "restart did not restore the job"
wait $run_pid || fail "the clients failed: $(cat "$tmp/clients.log")"
kill $server_pid
wait $server_pid 2>/dev/null || true

job=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$tmp/run.json")
"$perseus" export-job --store "$tmp/store.sqlite" --job "$job" --out "$tmp/dump" > /dev/null
/usr/bin/python3 - "$tmp/dump" "$rounds" <<'PY' || fail "results missing from the store"
import json, os, sys
dump, rounds = sys.argv[1], int(sys.argv[2])
for r in range(rounds - 1):  # every round but the final one is reported by all 4 ranks
    prof = json.load(open(os.path.join(dump, f"{r}.prof.json")))
    assert [p["rank"] for p in prof] == [0, 1, 2, 3], (r, [p["rank"] for p in prof])
assert os.path.exists(os.path.join(dump, f"{rounds - 1}.sched.json"))
PY
echo "ok: killed at round $round, $rounds rounds completed"
