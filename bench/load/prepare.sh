# Sourced by the control-plane server benches: builds perseus and the load client, and sets
# root (the checkout), perseus and client (their binaries).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$root/scripts/build.sh" >/dev/null
cmake --build "$root/build" --target perseus_load_client >/dev/null
perseus=$root/build/src/perseus
client=$root/build/bench/perseus_load_client
