#!/usr/bin/env bash
# Builds the Python extension on the GPU machine (Python 3.12, pip's pybind11, no Debian
# packages) from what was built here: the client's static libraries and nlohmann's headers,
# carried in build-device/ (see bench/gpu/README.md). Prints the module path.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dev=$root/build-device
suffix=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
g++ -std=c++20 -O2 -shared -fPIC -o "$root/python/perseus/_perseus$suffix" \
  "$root/python/src/bindings.cpp" -I"$root/src" -I"$dev/include" \
  $(python3 -m pybind11 --includes) \
  "$dev"/lib/libperseus_client.a "$dev"/lib/libperseus_wire.a \
  "$dev"/lib/libperseus_profile.a "$dev"/lib/libperseus_util.a -ldl -lpthread
echo "$root/python/perseus/_perseus$suffix"
