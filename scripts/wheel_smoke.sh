#!/usr/bin/env bash
# Build the wheel, install it (not editable) into a fresh venv beside the CPU torch, and run the
# entry points' --help from outside the repository: what a user gets from `pip install`.
set -euo pipefail
cd "$(dirname "$0")/.."
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
VENV=${VENV:-.venv}
t0=$(date +%s.%N)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/tmp"
export TMPDIR=$work/tmp   # uv build leaves uv-setuptools-*.lock in the temp folder
echo "[wheel] building ..." >&2
if [[ -x "$VENV/bin/uv" ]]; then
  "$VENV/bin/uv" build --wheel --out-dir "$work/dist" . >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
else
  "$VENV/bin/pip" wheel -q --no-deps -w "$work/dist" . >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
fi
wheel=$(ls "$work"/dist/*.whl)
echo "[wheel] built $(basename "$wheel"); installing it into a fresh venv ..." >&2
# The dependencies (torch included) come from $VENV through a path file; the package from the wheel,
# in the new venv's own site-packages, which come first (the editable install's hooks do not load).
"$VENV/bin/python" -m venv --without-pip "$work/venv"
site=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" >"$site/foundry-deps.pth"
"$VENV/bin/pip" --python "$work/venv/bin/python" install -q --no-deps "$wheel" >"$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
cd "$work"
env -u PYTHONPATH "$work/venv/bin/foundry" --help >/dev/null
env -u PYTHONPATH "$work/venv/bin/foundry-tui" --help >/dev/null
loc=$(env -u PYTHONPATH "$work/venv/bin/python" -c "import foundry, os; print(os.path.dirname(foundry.__file__))")
[[ $loc == "$work/venv/"* ]] || { echo "[wheel] foundry imported from $loc, not from the wheel" >&2; exit 1; }
echo "[wheel] foundry --help and foundry-tui --help work from the installed wheel ($(since "$t0") s)" >&2
