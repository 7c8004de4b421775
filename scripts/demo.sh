#!/usr/bin/env bash
# Set up Foundry (with the [aws] extra the README's "A run that moves" uses) and run the main job as
# a run on the embedded default: the local cluster, with data and checkpoints in file:// storage
# under FOUNDRY_HOME. `foundry get runs`, `foundry describe run main-job` and `foundry-tui` show it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export VENV
bash scripts/setup.sh aws
exec "$VENV/bin/python" examples/main_job.py "$@"
