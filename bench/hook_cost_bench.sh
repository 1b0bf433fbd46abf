#!/usr/bin/env bash
# What the client's hooks cost the training thread (DESIGN section 9): median and p99 of each
# hook call on the NVML backend over the fake libnvidia-ml at its H100-like defaults (100 ms
# refresh, 4 ms blocking reads), beside the old design's cost (one now_s() and one counter read
# on the training thread per hook).
# Usage: bash bench/hook_cost_bench.sh [build dir=build] [hook iterations=2000]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target hook_cost_bench fake_nvml >/dev/null
"$build/bench/hook_cost_bench" "$build/tests/libnvidia-ml.so.1" "${2:-2000}"
