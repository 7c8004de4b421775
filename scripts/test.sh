#!/usr/bin/env bash
# Set up the test environment and run the whole suite (unit + integration against real local
# servers, which the fixtures start on loopback and stop afterwards).
#   bash scripts/test.sh [PYTEST ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export FOUNDRY_DISABLE_PLUGIN_AUTOLOAD=1
exec .venv/bin/python -m pytest -q -rfE "$@"
