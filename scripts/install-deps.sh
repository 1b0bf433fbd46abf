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
# groff-base: tests/cli/completion_man.sh renders the generated man page.
# python3-pandas, python3-matplotlib: Frontier.to_pandas() and Frontier.plot(), tested on Debian's
# python3 (python/tests/test_planning.py).
packages=(g++ cmake make ninja-build nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libbenchmark-dev libboost-dev libboost-graph-dev libsqlite3-dev libssl-dev openssl time
  python3-dev python3-pybind11 pybind11-dev python3-torch python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel python3-prometheus-client
  python3-pandas python3-matplotlib
  chromium chromium-driver python3-selenium fonts-dejavu-core groff-base)
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

# The project virtual environment for what only PyPI has (torch 2.x with
# torch.distributed.pipelining, deepspeed, megatron-core, zeus), pinned in
# scripts/python-requirements*.txt: .venv/ (or $PERSEUS_VENV), made from Debian's /usr/bin/python3
# with --system-site-packages so that Debian's pytest and the perseus package built for that
# interpreter work in it. Skipped when it was made from the same pins (a stamp holds their hash).
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${PERSEUS_VENV:-$root/.venv}
pins=$(cat "$root/scripts/python-requirements.txt" "$root/scripts/python-requirements-build.txt" |
  sha256sum | cut -d' ' -f1)
if [[ ! -x $venv/bin/python || $(cat "$venv/.perseus-pins" 2>/dev/null) != "$pins" ]]; then
  echo "install-deps: installing the pinned PyPI packages into $venv (torch, zeus, megatron-core," \
    "deepspeed; a few GB, once)" >&2
  [[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/python-requirements.txt"
  DS_BUILD_OPS=0 "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
    -r "$root/scripts/python-requirements-build.txt"
  echo "$pins" >"$venv/.perseus-pins"
fi
