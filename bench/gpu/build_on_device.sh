#!/usr/bin/env bash
# Builds the Python extension on the GPU machine (its Python 3.12, no Debian packages) from what
# bench/gpu/prepare.sh carried in build-device/: the client's and the planner's (perseus.plan)
# static libraries, nlohmann's headers and OpenSSL. Uses the machine's pybind11 and falls back to
# Debian's carried headers.
# The package lands in build-device/python (put it on PYTHONPATH); prints that folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dev=${PERSEUS_DEVICE_DIR:-$root/build-device}
py=${PYTHON:-python3}
suffix=$($py -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
python_include=$($py -c "import sysconfig; print(sysconfig.get_paths()['include'])")
if [ ! -f "$python_include/Python.h" ]; then  # a venv whose base lacks them: look elsewhere
  version=$($py -c "import sys; print(f'python{sys.version_info[0]}.{sys.version_info[1]}')")
  header=$(find / -xdev -name Python.h -path "*/$version/*" 2>/dev/null | head -1)
  python_include=$(dirname "${header:-$python_include/Python.h}")
fi
mkdir -p "$dev/python/perseus"
cp "$root"/python/perseus/*.py "$dev/python/perseus/"
module=$dev/python/perseus/_perseus$suffix
compile() {
  g++ -std=c++20 -O2 -shared -fPIC -o "$module" "$root"/python/src/*.cpp \
    -DPERSEUS_VERSION='"device"' -I"$root/src" -I"$dev/include" "$@" -I"$python_include" \
    "$dev"/lib/libperseus_client.a "$dev"/lib/libperseus_measure.a "$dev"/lib/libperseus_wire.a \
    "$dev"/lib/libperseus_baselines.a "$dev"/lib/libperseus_emulate.a \
    "$dev"/lib/libperseus_plan.a "$dev"/lib/libperseus_schedule.a \
    "$dev"/lib/libperseus_profile.a "$dev"/lib/libperseus_util.a \
    "$dev/lib/libssl.so.3" "$dev/lib/libcrypto.so.3" -Wl,-rpath,"$dev/lib" -ldl -lpthread
}
if pybind=$($py -c "import pybind11; print(pybind11.get_include())" 2>/dev/null) &&
  compile -I"$pybind" 2>"$dev/pybind11-machine.log"; then
  echo "built with the machine's pybind11 ($pybind)" >&2
else
  echo "the machine's pybind11 failed (build-device/pybind11-machine.log); Debian's headers" >&2
  compile -I"$dev/include/debian-pybind11"
fi
echo "$dev/python"
