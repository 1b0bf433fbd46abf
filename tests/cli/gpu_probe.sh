#!/usr/bin/env bash
# `perseus gpu probe` against the fake libnvidia-ml ($FAKE_NVML_LIBRARY, set by ctest): human and
# --json output match the fake's configured counter, SM clock and power cap, CUDA_VISIBLE_DEVICES selects by UUID, bad
# devices and options are one-line errors, progress stays off a non-terminal stderr, and the
# driver is never asked to change anything.
# Usage: FAKE_NVML_LIBRARY=<libnvidia-ml.so.1> bash gpu_probe.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/lib.sh"

lib=${FAKE_NVML_LIBRARY:-}
[[ -f $lib ]] || fail "FAKE_NVML_LIBRARY (the fake libnvidia-ml) not set or missing: '$lib'"
unset CUDA_VISIBLE_DEVICES
export FAKE_NVML_LOG=$tmp/nvml.log FAKE_NVML_REFRESH_MS=50 FAKE_NVML_READ_MS=2 FAKE_NVML_POWER_W=250

# within VALUE EXPECTED FRACTION: VALUE is within FRACTION of EXPECTED.
within() {
  awk -v v="$1" -v e="$2" -v f="$3" 'BEGIN { d = v - e; if (d < 0) d = -d; exit !(v != "" && d <= f * e) }'
}

out=$("$perseus" gpu --help)
[[ $out == *probe* ]] || fail "gpu --help lacks probe: $out"
out=$("$perseus" gpu probe --help)
for option in --device --library --duration --json; do
  [[ $out == *"$option"* ]] || fail "gpu probe --help lacks $option: $out"
done

# Human-readable: `key value` lines; nothing on stderr (not a terminal: no progress note).
"$perseus" gpu probe --library "$lib" --duration 0.6 > "$tmp/probe.txt" 2> "$tmp/stderr" ||
  fail "gpu probe failed: $(cat "$tmp/stderr")"
[[ ! -s $tmp/stderr ]] || fail "gpu probe wrote to a non-terminal stderr: $(cat "$tmp/stderr")"
grep -qx "name Fake NVIDIA H100 80GB HBM3" "$tmp/probe.txt" || fail "no name: $(cat "$tmp/probe.txt")"
grep -qx "driver 580.159.04" "$tmp/probe.txt" || fail "no driver: $(cat "$tmp/probe.txt")"
[[ $(value_of uuid "$tmp/probe.txt") == GPU-00000000-fa4e-4000-8000-000000000000 ]] ||
  fail "wrong uuid: $(cat "$tmp/probe.txt")"
[[ $(value_of sm_clocks_mhz "$tmp/probe.txt") == 1410 ]] || fail "clocks: $(cat "$tmp/probe.txt")"
within "$(value_of refresh_period_ms "$tmp/probe.txt")" 50 0.1 ||
  fail "refresh period not ~50 ms: $(cat "$tmp/probe.txt")"
within "$(value_of read_cost_ms "$tmp/probe.txt")" 2 2 || fail "read cost: $(cat "$tmp/probe.txt")"
within "$(value_of power_w "$tmp/probe.txt")" 250 0.02 || fail "power: $(cat "$tmp/probe.txt")"
within "$(value_of counter_power_w "$tmp/probe.txt")" 250 0.02 ||
  fail "counter slope: $(cat "$tmp/probe.txt")"
grep -qx "sm_clock_mhz 1410 (min 1410, max 1410)" "$tmp/probe.txt" || fail "SM clock: $(cat "$tmp/probe.txt")"
grep -qx "clock_event_reasons none" "$tmp/probe.txt" || fail "reasons: $(cat "$tmp/probe.txt")"
grep -qx "power_limit_w 400.0 (default 400.0)" "$tmp/probe.txt" || fail "limit: $(cat "$tmp/probe.txt")"
# A GPU without an energy counter (before Volta) is still probed: the counter's line says why.
FAKE_NVML_NO_ENERGY_COUNTER=1 "$perseus" gpu probe --library "$lib" --duration 0.2 \
  > "$tmp/no_counter.txt" 2>&1 || fail "probe without a counter failed: $(cat "$tmp/no_counter.txt")"
grep -qx "energy_counter none (this GPU has no energy counter (NVML nvmlDeviceGetTotalEnergyConsumption: Not Supported, as on GPUs before Volta and some virtual GPUs))" \
  "$tmp/no_counter.txt" || fail "no counter: $(cat "$tmp/no_counter.txt")"
! grep -q "read_cost_ms" "$tmp/no_counter.txt" || fail "read cost without a counter: $(cat "$tmp/no_counter.txt")"
within "$(value_of power_w "$tmp/no_counter.txt")" 250 0.02 || fail "power: $(cat "$tmp/no_counter.txt")"
# A driver that does not answer (the fake blocks device calls while the file exists): one line on
# stderr and exit 1 once --timeout has passed after --duration, instead of hanging for good.
touch "$tmp/hang"
start=$(date +%s.%N)
if FAKE_NVML_HANG_FILE=$tmp/hang "$perseus" gpu probe --library "$lib" --duration 0.2 --timeout 1 \
  > "$tmp/hung.txt" 2> "$tmp/hung.err"; then
  fail "gpu probe with a hung driver succeeded: $(cat "$tmp/hung.txt")"
fi
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')
awk -v t="$took" 'BEGIN { exit !(t >= 1.1 && t < 10) }' || fail "hung probe took $took s"
[[ $(wc -l < "$tmp/hung.err") == 1 ]] || fail "hung probe stderr: $(cat "$tmp/hung.err")"
grep -q "error: gpu probe: the GPU driver did not answer: the probe had not finished 1 s after" \
  "$tmp/hung.err" || fail "hung probe message: $(cat "$tmp/hung.err")"
rm "$tmp/hang"
out=$("$perseus" gpu probe --library "$lib" --timeout 0 2>&1) && fail "--timeout 0 accepted"
[[ $out == *"probe timeout must be a positive number of seconds, got 0"* ]] || fail "--timeout 0: $out"
# At the power limit (the fake's is 400 W) the driver says the power cap holds the clock.
FAKE_NVML_POWER_W=450 "$perseus" gpu probe --library "$lib" --duration 0.2 > "$tmp/capped.txt"
grep -qx "clock_event_reasons sw_power_cap" "$tmp/capped.txt" || fail "capped: $(cat "$tmp/capped.txt")"
# A device that does not report its power limit is probed all the same.
FAKE_NVML_NO_POWER_LIMIT=1 "$perseus" gpu probe --library "$lib" --duration 0.2 > "$tmp/nolimit.txt" ||
  fail "probe without a power limit failed: $(cat "$tmp/nolimit.txt")"
grep -qx "power_limit_w unknown (NVML nvmlDeviceGetEnforcedPowerLimit failed: Not Supported)" \
  "$tmp/nolimit.txt" || fail "no limit: $(cat "$tmp/nolimit.txt")"
FAKE_NVML_NO_CLOCK_REASONS=1 "$perseus" gpu probe --library "$lib" --duration 0.2 --json \
  > "$tmp/noreasons.json" || fail "probe without clock event reasons failed"
/usr/bin/python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))
assert p["clock_event_reasons"] is None and p["sm_clock_mhz"]["mean"] == 1410, p' \
  "$tmp/noreasons.json" || fail "no reasons: $(cat "$tmp/noreasons.json")"

# --json, on the device CUDA_VISIBLE_DEVICES names by UUID (second entry: CUDA device 1).
uuid=GPU-00000002-fa4e-4000-8000-000000000002
FAKE_NVML_DEVICES=3 CUDA_VISIBLE_DEVICES="GPU-00000000,$uuid" \
  "$perseus" gpu probe --device 1 --library "$lib" --duration 0.6 --json > "$tmp/probe.json" ||
  fail "gpu probe --json failed"
/usr/bin/python3 - "$tmp/probe.json" "$uuid" <<'PY' || fail "bad JSON: $(cat "$tmp/probe.json")"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["uuid"] == sys.argv[2] and p["nvml_index"] == 2 and p["cuda_index"] == 1, p
assert p["name"] == "Fake NVIDIA H100 80GB HBM3" and p["driver"] == "580.159.04", p
assert p["sm_clocks_mhz"] == [1410, 1395, 1380, 1005], p
assert abs(p["refresh_period_s"]["mean"] - 0.05) <= 0.005, p
assert p["refresh_period_s"]["min"] <= p["refresh_period_s"]["mean"] <= p["refresh_period_s"]["max"]
assert 0.8 * 0.002 <= p["read_cost_s"]["mean"] <= 3 * 0.002, p
assert abs(p["power_w"]["mean"] - 250) <= 5 and abs(p["power_w"]["counter_slope"] - 250) <= 5, p
assert p["counter_changes"] >= 8 and p["counter_reads"] > p["counter_changes"], p
assert p["sm_clock_mhz"] == {"mean": 1410, "min": 1410, "max": 1410}, p
assert p["clock_event_reasons"] == [], p
assert p["power_limit_w"] == {"enforced": 400.0, "default": 400.0}, p
PY

# Errors: one line, exit status 1.
expect_error "NVML device 4: no such device: NVML lists 1 device(s) (0..0)" gpu probe --device 4 --library "$lib" --duration 0.1
CUDA_VISIBLE_DEVICES=MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21 expect_error \
  "CUDA_VISIBLE_DEVICES=MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21 names MIG instances" \
  gpu probe --library "$lib" --duration 0.1
FAKE_NVML_DEVICES=2 CUDA_VISIBLE_DEVICES=GPU-0000000 expect_error \
  "(entry 'GPU-0000000' is a prefix of 2 NVML devices' UUIDs, which ends the list)" \
  gpu probe --library "$lib" --duration 0.1
CUDA_VISIBLE_DEVICES=GPU-ffff expect_error "(entry 'GPU-ffff' matches none of NVML's 1 devices" \
  gpu probe --library "$lib" --duration 0.1
# CUDA hides a device named after an entry that names none, and every device when the value is
# empty: the probe never reads a GPU the training could not see.
FAKE_NVML_DEVICES=2 CUDA_VISIBLE_DEVICES="0,-1,1" expect_error \
  "CUDA device 1 is not visible: CUDA_VISIBLE_DEVICES=0,-1,1 makes 1 device(s) visible" \
  gpu probe --device 1 --library "$lib" --duration 0.1
CUDA_VISIBLE_DEVICES= expect_error "(an empty value hides every device)" \
  gpu probe --library "$lib" --duration 0.1
expect_error "probe duration must be a number of seconds in (0, 600]" \
  gpu probe --library "$lib" --duration 0
expect_error "cannot load NVML ($tmp/none.so)" gpu probe --library "$tmp/none.so"

# Read-only: the driver saw reads, and never a set, reset or clear call.
grep -q '^nvmlDeviceGetTotalEnergyConsumption$' "$FAKE_NVML_LOG" || fail "no counter reads logged"
if grep -E '^nvml(DeviceSet|DeviceReset|DeviceClear|SystemSet)' "$FAKE_NVML_LOG"; then
  fail "gpu probe made a mutating NVML call (above)"
fi
echo "ok"
