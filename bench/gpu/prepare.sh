#!/usr/bin/env bash
# Fills build-device/ (ignored; name it in the device tool's `carry`) with what the GPU machine
# needs and cannot install: the client's and the planner's static libraries (the Python
# extension links both), nlohmann's and pybind11's headers,
# the `perseus` binary and the shared libraries it and the extension need beyond glibc and
# libstdc++ (OpenSSL, SQLite). Run here after scripts/build.sh; see bench/gpu/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
dev=${PERSEUS_DEVICE_DIR:-$root/build-device}
rm -rf "$dev"
mkdir -p "$dev/lib" "$dev/include" "$dev/bin"
for lib in client measure wire baselines emulate plan schedule profile util; do
  cp "$build/src/libperseus_$lib.a" "$dev/lib/"
done
cp -r /usr/include/nlohmann "$dev/include/"
mkdir -p "$dev/include/debian-pybind11"
cp -r /usr/include/pybind11 "$dev/include/debian-pybind11/"
cp "$build/src/perseus" "$dev/bin/"
# The binary's shared libraries except glibc's own (the GPU machine's glibc is newer).
ldd "$build/src/perseus" | awk '/=> \//{print $3}' |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  xargs -I{} cp -L {} "$dev/lib/"
du -sh "$dev"
