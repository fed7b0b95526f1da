#!/usr/bin/env bash
# Creates .venv (if missing) and installs asynqpy into it, editable, with the embedded Valkey and the test and
# dev tools (`.[dev,embedded]`). Idempotent and quick when nothing changed: the install is skipped while
# .venv/.setup-stamp holds the hash of pyproject.toml and of this script (delete the stamp to force it).
# Afterwards `source .venv/bin/activate` puts the `asynqpy` command on PATH (or run .venv/bin/asynqpy).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.setup-stamp
want=$(cat pyproject.toml scripts/setup.sh | .venv/bin/python -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev,embedded]'
echo "$want" > "$stamp"
echo "setup: installed asynqpy into .venv (source .venv/bin/activate to put \`asynqpy\` on PATH)"
