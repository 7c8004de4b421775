#!/usr/bin/env bash
# Set up the test environment and run the whole suite (unit + integration against real local
# servers, which the fixtures start on loopback and stop afterwards).
#   bash scripts/test.sh [PYTEST ARGS]
# Each preparation step prints one line with its time; nothing is rebuilt that is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
T_START=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
VENV=${VENV:-.venv}
export VENV
bash scripts/setup.sh test

# One-time preparation, outside pytest's per-test timeouts: the Slurm packages (the fixture starts
# and stops the daemons) and the mosaicml-streaming peer venv for the interop tests (cached).
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  t0=$(date +%s.%N)
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null; then
    echo "[setup] Slurm packages already installed" >&2
  else
    echo "[setup] installing the Slurm packages (apt) ..." >&2
    bash scripts/infra/slurm.sh install
    echo "[setup] Slurm packages: done in $(since "$t0") s" >&2
  fi
  if ! command -v tmux >/dev/null; then   # the TUI's end-to-end test drives a real terminal
    t0=$(date +%s.%N)
    echo "[setup] installing tmux (apt) ..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux >/dev/null
    echo "[setup] tmux: done in $(since "$t0") s" >&2
  fi
fi
"$VENV/bin/python" -c "import sys; sys.path.insert(0, 'tests'); from support.peers import mosaic_python; mosaic_python(progress=True)"
echo "[setup] test environment ready in $(since "$T_START") s; running pytest" >&2

export FOUNDRY_DISABLE_PLUGIN_AUTOLOAD=1
exec "$VENV/bin/python" -m pytest -q -rfEs --durations=20 "$@"
