#!/usr/bin/env bash
# Installs the Debian packages Perseus needs to build and test. Idempotent: installs only what is
# missing, and does nothing (no network) when everything is present.
set -euo pipefail
# chromium, chromium-driver, python3-selenium and the DejaVu fonts: the report's browser test
# (tests/cli/report_browser.sh) opens the HTML report in headless Chromium.
# libssl-dev: TLS and SHA-256 of job secrets; openssl: the tests make certificates with it.
# python3-pybind11, python3-torch, python3-pytest: the Python package, its tests and the PyTorch
# example (Debian's /usr/bin/python3). python3-venv, python3-pip, python3-setuptools,
# python3-wheel: the wheel, installed into a virtual environment by tests/install/.
# python3-prometheus-client: its text parser reads GET /metrics in tests/server/test_metrics.py.
packages=(g++ cmake make ninja-build nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libbenchmark-dev libboost-dev libboost-graph-dev libsqlite3-dev libssl-dev openssl time
  python3-dev python3-pybind11 pybind11-dev python3-torch python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel python3-prometheus-client
  chromium chromium-driver python3-selenium fonts-dejavu-core)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
