#!/usr/bin/env bash
# Builds Perseus and runs every test (GoogleTest unit tests, command-line, server, Python and
# install tests via CTest). Arguments go to ctest: `bash scripts/test.sh -L unit` runs the unit
# tests only (seconds), `-LE slow` all but the few that take minutes (docs/architecture.md, "Tests").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)" "$@"
