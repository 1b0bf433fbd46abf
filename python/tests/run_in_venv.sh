#!/usr/bin/env bash
# Runs pytest with the project virtual environment's interpreter (scripts/install-deps.sh makes it:
# Debian's python3 with the pinned PyPI packages, torch 2.x among them): VENV, then pytest's
# arguments. Fails, saying what to run, where that environment is missing.
set -euo pipefail
venv=$1
shift
if [[ ! -x $venv/bin/python ]]; then
  echo "no project virtual environment at $venv: run scripts/install-deps.sh" >&2
  exit 1
fi
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
