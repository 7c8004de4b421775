#!/usr/bin/env bash
# Set up the test environment and run the whole suite (unit + integration against real local
# servers, which the fixtures start on loopback and stop afterwards).
#   bash scripts/test.sh [PYTEST ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test

# One-time preparation, outside pytest's per-test timeouts: the Slurm packages (the fixture starts
# and stops the daemons) and the mosaicml-streaming peer venv for the interop tests (cached).
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  bash scripts/infra/slurm.sh install
fi
.venv/bin/python -c "import sys; sys.path.insert(0, 'tests'); from support.peers import mosaic_python; mosaic_python()"

export FOUNDRY_DISABLE_PLUGIN_AUTOLOAD=1
exec .venv/bin/python -m pytest -q -rfE --durations=20 "$@"
