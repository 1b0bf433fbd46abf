#!/usr/bin/env bash
# The whole real-GPU check of issue 11 in one call of the device tool, observe-only: it changes
# no GPU setting (NVML reads only, no clock lock, no power limit, no reset). Needs build-device/
# from bench/gpu/prepare.sh (carried). Writes machine.txt (with the probe by UUID at its end),
# probe.json, build.log, refresh_clock.json, counter_kernel.json, attribution.log,
# attribution.json and traces.json under $OUT (default /tmp/perseus-gpu): the device tool
# brings back at most 8 files.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/perseus-gpu}
mkdir -p "$out"
cd "$root"
{
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw,power.limit --format=csv
  python3 --version
  g++ --version | head -1
  python3 -c "import torch; print('torch', torch.__version__)"
} >"$out/machine.txt" 2>&1
cli() { LD_LIBRARY_PATH=$root/build-device/lib timeout 60 build-device/bin/perseus "$@"; }
cli gpu probe --json >"$out/probe.json" 2>&1
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
echo "--- perseus gpu probe with CUDA_VISIBLE_DEVICES=$uuid" >>"$out/machine.txt"
CUDA_VISIBLE_DEVICES=$uuid cli gpu probe --duration 0.5 >>"$out/machine.txt" 2>&1
if ! package=$(bash bench/gpu/build_on_device.sh 2>"$out/build.log"); then
  cat "$out/build.log"
  exit 1
fi
timeout 60 python3 bench/gpu/refresh_clock.py "$out/refresh_clock.json" >>"$out/build.log" 2>&1
PYTHONPATH=$package timeout 150 python3 bench/gpu/counter_kernel.py "$out/counter_kernel.json" 2>&1 |
  tee -a "$out/build.log"
cat build-device/pybind11-machine.log >>"$out/build.log" 2>/dev/null  # at most 8 files come back
PYTHONPATH=$package PYTHONUNBUFFERED=1 timeout 420 \
  python3 bench/gpu/attribution_on_gpu.py "$out/attribution.json" "$out/traces.json" 2>&1 |
  tee "$out/attribution.log"
