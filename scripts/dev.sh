#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs `asynqpy dev`: an embedded Valkey (unless REDIS_URL is set),
# a worker with demo handlers and a producer that keeps demo tasks flowing. Ctrl-C, SIGTERM or closing the
# terminal stops everything. `source .venv/bin/activate` puts the `asynqpy` command on PATH in other terminals.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -n "${REDIS_URL:-}" ]; then
  exec .venv/bin/asynqpy dev --redis-url "$REDIS_URL" "$@"
fi
exec .venv/bin/asynqpy dev "$@"
