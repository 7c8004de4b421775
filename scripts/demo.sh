#!/usr/bin/env bash
# Set up Foundry and run the main job on the embedded default: the local cluster, with data and
# checkpoints in file:// storage under FOUNDRY_HOME.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/main_job.py "$@"
