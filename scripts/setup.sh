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

if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "installing torch==2.13.0 (CPU build)" >&2
  "$VENV/bin/pip" install -q "torch==2.13.0"
fi
spec="."
[[ -n "$EXTRAS" ]] && spec=".[${EXTRAS}]"
# The constraint keeps any dependency from swapping the installed torch for a CUDA build.
TORCH_VERSION=$("$VENV/bin/python" -c "import torch; print(torch.__version__)")
echo "torch==${TORCH_VERSION}" > "$VENV/torch-constraint.txt"
"$VENV/bin/pip" install -q -c "$VENV/torch-constraint.txt" -e "$spec"
echo "foundry installed in $VENV" >&2
