#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds Perseus (Release) into build/.
# Extra arguments go to the CMake configure step. Builds with as many jobs as there are cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$root/build" -j "$(nproc)"
