#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install Foundry into it.
#   bash scripts/setup.sh [EXTRAS]      e.g. bash scripts/setup.sh test
# Installs torch==2.13.0 (the CPU build) first when no torch is present: an unpinned torch
# would pull several GB of CUDA packages. VENV=path overrides the location (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
EXTRAS=${1:-}
LOG="$VENV.setup.log"

pip_quiet() {  # pip's output goes to a log, shown only when it fails
  if ! "$VENV/bin/pip" "$@" >>"$LOG" 2>&1; then
    tail -40 "$LOG" >&2
    echo "setup failed: pip $*  (full log: $LOG)" >&2
    exit 1
  fi
}

: >"$LOG"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "creating $VENV" >&2
  "$PYTHON" -m venv "$VENV"
  pip_quiet install -q --upgrade pip
fi
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "installing torch==2.13.0 (CPU build)" >&2
  pip_quiet install -q "torch==2.13.0"
fi
spec="."
[[ -n "$EXTRAS" ]] && spec=".[${EXTRAS}]"
# The constraint keeps any dependency from swapping the installed torch for a CUDA build.
TORCH_VERSION=$("$VENV/bin/python" -c "import torch; print(torch.__version__)" 2>/dev/null)
echo "torch==${TORCH_VERSION}" > "$VENV/torch-constraint.txt"
echo "installing foundry${EXTRAS:+[$EXTRAS]}" >&2
pip_quiet install -q -c "$VENV/torch-constraint.txt" -e "$spec"
echo "foundry installed in $VENV" >&2
