#!/usr/bin/env bash
# Builds Perseus and runs every test (GoogleTest unit tests and command-line tests via CTest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)"
