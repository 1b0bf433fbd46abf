# Sourced by the control-plane server benches: builds perseus and the load client, and sets
# root (the checkout), perseus and client (their binaries). PERSEUS_BIN names another perseus
# binary to measure (an older build, side by side with this one).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$root/scripts/build.sh" >/dev/null
cmake --build "$root/build" --target perseus_load_client >/dev/null
perseus=${PERSEUS_BIN:-$root/build/src/perseus}
client=$root/build/bench/perseus_load_client
