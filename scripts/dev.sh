#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs `asynqpy dev`: an embedded Valkey (unless REDIS_URL is set),
# a worker with demo handlers and a producer that keeps demo tasks flowing. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -n "${REDIS_URL:-}" ]; then
  exec .venv/bin/asynqpy dev --redis-url "$REDIS_URL" "$@"
fi
exec .venv/bin/asynqpy dev "$@"
