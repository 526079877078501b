#!/usr/bin/env bash
# Creates (or refreshes) the project virtual environment in .venv at the repo root.
# Idempotent and quiet: safe to call repeatedly; it only installs what is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.requirements.stamp
if [ ! -f "$stamp" ] || ! cmp -s tools/requirements.txt "$stamp"; then
  .venv/bin/pip install -q --disable-pip-version-check -r tools/requirements.txt
  cp tools/requirements.txt "$stamp"
fi
