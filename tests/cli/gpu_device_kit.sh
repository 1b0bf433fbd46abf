#!/usr/bin/env bash
# The kit the real-GPU check carries to a machine without Debian packages (bench/gpu/README.md):
# bench/gpu/prepare.sh packs the client's static libraries, headers, the perseus binary and its
# shared libraries; bench/gpu/build_on_device.sh compiles the Python extension from them alone.
# Here both run as on that machine (into a temporary folder), then the carried binary and the
# built package probe the fake libnvidia-ml, read-only. A GPU session has minutes of device
# time: a kit that does not build must fail here, not there.
# Usage: FAKE_NVML_LIBRARY=<libnvidia-ml.so.1> bash gpu_device_kit.sh <perseus-binary> <shared-data-dir>
set -euo pipefail
perseus=$(realpath "$1")
build=$(dirname "$(dirname "$perseus")")
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/lib.sh"

lib=${FAKE_NVML_LIBRARY:-}
[[ -f $lib ]] || fail "FAKE_NVML_LIBRARY (the fake libnvidia-ml) not set or missing: '$lib'"
export PERSEUS_DEVICE_DIR=$tmp/kit FAKE_NVML_LOG=$tmp/nvml.log FAKE_NVML_READ_MS=1
unset CUDA_VISIBLE_DEVICES

bash "$root/bench/gpu/prepare.sh" "$build" >"$tmp/prepare.log" 2>&1 ||
  fail "prepare.sh failed: $(tail -3 "$tmp/prepare.log")"
for f in lib/libperseus_client.a include/nlohmann/json.hpp bin/perseus; do
  [[ -f $tmp/kit/$f ]] || fail "prepare.sh did not pack $f"
done

package=$(PYTHON=/usr/bin/python3 bash "$root/bench/gpu/build_on_device.sh" 2>"$tmp/build.log") ||
  fail "build_on_device.sh failed: $(tail -5 "$tmp/build.log")"
[[ $package == "$tmp/kit/python" ]] || fail "build_on_device.sh printed '$package'"

# The carried binary runs on the carried libraries alone (none from this machine's lib folders
# beyond glibc's and libstdc++'s, which prepare.sh leaves out on purpose).
missing=$(LD_LIBRARY_PATH=$tmp/kit/lib ldd "$tmp/kit/bin/perseus" | grep 'not found' || true)
[[ -z $missing ]] || fail "the carried perseus lacks libraries: $missing"
out=$(LD_LIBRARY_PATH=$tmp/kit/lib "$tmp/kit/bin/perseus" gpu probe --library "$lib" \
  --duration 0.3 --json) || fail "the carried perseus could not probe: $out"
[[ $out == *'"sm_clocks_mhz"'* ]] || fail "carried probe output: $out"

PYTHONPATH=$package /usr/bin/python3 - "$lib" <<'PY' || fail "the device-built package failed"
import sys
import perseus
assert perseus.__version__ == "device", perseus.__version__
probe = perseus.gpu_probe(library=sys.argv[1], duration=0.3)
assert probe["name"] == "Fake NVIDIA H100 80GB HBM3", probe
assert probe["sm_clock_mhz"]["max"] > 0, probe
PY
! grep -Eq 'Set|Reset' "$tmp/nvml.log" || fail "the kit asked the driver for a change: $(grep -E 'Set|Reset' "$tmp/nvml.log")"
echo "gpu_device_kit: ok"
