#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install Foundry into it.
#   bash scripts/setup.sh [EXTRAS]      e.g. bash scripts/setup.sh aws    or    bash scripts/setup.sh test
# One line per step with how long it took; a line every 10 s while a step runs (never silent).
# Installs torch==2.13.0 (the CPU build) first when no torch is present: an unpinned torch would pull
# several GB of CUDA packages. torch goes through pip (pip's configuration may point at a local
# wheel that uv does not see); everything else goes through uv when it can be had (USE_UV=0: pip only).
# A venv that already holds foundry with these extras and an unchanged pyproject.toml is reused as is.
# VENV=path overrides the location (default .venv); PYTHON the interpreter that creates it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
EXTRAS=${1:-}
USE_UV=${USE_UV:-1}
LOG="$VENV.setup.log"
STAMP="$VENV/.foundry-setup"
T_START=$(date +%s.%N)
# pip's and uv's temporary files (uv leaves uv-setuptools-*.lock behind) go to a folder removed at exit
SETUP_TMP=$(mktemp -d)
trap 'rm -rf "$SETUP_TMP"' EXIT
export TMPDIR=$SETUP_TMP

since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
say() { echo "[setup] $*" >&2; }

# step "what it does" CMD...: the command's output goes to the log; a heartbeat with the log's latest
# line every 10 s; on failure the log's tail and one line naming the step.
step() {
  local what=$1 t0 pid n=0 last
  shift
  t0=$(date +%s.%N)
  say "$what ..."
  echo "### $what: $*" >>"$LOG"
  "$@" >>"$LOG" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if ((n % 10 == 0)); then
      last=$(grep -v -e '^[[:space:]]*$' -e '^WARNING' "$LOG" | tail -1 | cut -c1-90)
      say "  ... ${n}s: ${last}"
    fi
  done
  if ! wait "$pid"; then
    if [[ ${OPTIONAL:-0} == 1 ]]; then say "$what: failed, going on without it (log: $LOG)"; return 1; fi
    tail -30 "$LOG" >&2
    say "failed: $what (full log: $LOG)"
    exit 1
  fi
  say "$what: done in $(since "$t0") s"
}

# What a successful install recorded: its extras and the pyproject.toml it came from. A venv set up
# for the tests (or [all]) already holds every cloud extra, so `demo` reuses it.
pyproject_sum=$(cksum <pyproject.toml | cut -d' ' -f1)
covered() {  # covered INSTALLED_EXTRAS WANTED_EXTRAS
  local have=",$1," e
  [[ $have == *,test,* || $have == *,all,* ]] && have="$have,aws,r2,gcp,oci,kubernetes,compression,"
  for e in ${2//,/ }; do [[ $have == *",$e,"* ]] || return 1; done
}
if [[ -x "$VENV/bin/python" && -f "$STAMP" ]] && grep -qxF "pyproject=$pyproject_sum" "$STAMP" \
   && covered "$(sed -n 's/^extras=//p' "$STAMP")" "$EXTRAS" \
   && "$VENV/bin/python" -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('foundry') and u.find_spec('torch')))" 2>/dev/null; then
  say "reusing $VENV: foundry${EXTRAS:+[$EXTRAS]} is installed and pyproject.toml is unchanged ($(since "$T_START") s)"
  exit 0
fi

mkdir -p "$(dirname "$LOG")"
: >"$LOG"
if [[ ! -x "$VENV/bin/python" ]]; then
  step "creating $VENV with $($PYTHON --version 2>&1)" "$PYTHON" -m venv "$VENV"
fi

UV=""
if [[ $USE_UV == 1 ]]; then
  if [[ -x "$VENV/bin/uv" ]]; then
    UV="$VENV/bin/uv"
  elif command -v uv >/dev/null; then
    UV=$(command -v uv)
  elif OPTIONAL=1 step "installing uv (fast installer) into $VENV" "$VENV/bin/pip" install -q uv; then
    UV="$VENV/bin/uv"
  fi
fi

torch_version() {  # the installed torch's version without the local label, or nothing (no import: fast)
  "$VENV/bin/python" -c "from importlib.metadata import version; print(version('torch').split('+')[0])" 2>/dev/null || true
}
# uv may take torch only from a folder of wheels that pip's configuration names and that holds the
# 2.13.0 file: from an index, the same version is the CUDA build.
torch_links() {
  local dir
  for dir in $("$VENV/bin/pip" config get global.find-links 2>/dev/null || echo "${PIP_FIND_LINKS:-}"); do
    compgen -G "$dir/torch-2.13.0*.whl" >/dev/null && echo "$dir"
  done
}
if [[ -z $(torch_version) ]]; then
  links=$(torch_links | head -1)
  if [[ -n "$UV" && -n "$links" ]]; then
    step "installing torch==2.13.0 (CPU build from $links, uv)" \
      "$UV" pip install --python "$VENV/bin/python" --find-links "$links" "torch==2.13.0"
  else
    step "installing torch==2.13.0 (CPU build, pip)" "$VENV/bin/pip" install -q "torch==2.13.0"
  fi
else
  say "torch $(torch_version) is already in $VENV"
fi
# The constraint keeps any dependency from swapping the installed torch for a CUDA build.
TORCH_VERSION=$(torch_version)
echo "torch==${TORCH_VERSION}" >"$VENV/torch-constraint.txt"

spec="."
[[ -n "$EXTRAS" ]] && spec=".[${EXTRAS}]"
# uv first; pip (with its own configuration: mirrors, caps) if uv cannot do it here
if [[ -z "$UV" ]] || ! OPTIONAL=1 step "installing foundry${EXTRAS:+[$EXTRAS]} and its dependencies (uv)" \
    "$UV" pip install --python "$VENV/bin/python" -c "$VENV/torch-constraint.txt" -e "$spec"; then
  step "installing foundry${EXTRAS:+[$EXTRAS]} and its dependencies (pip)" \
    "$VENV/bin/pip" install -q -c "$VENV/torch-constraint.txt" -e "$spec"
fi
printf 'pyproject=%s\nextras=%s\n' "$pyproject_sum" "$EXTRAS" >"$STAMP"
say "foundry${EXTRAS:+[$EXTRAS]} installed in $VENV in $(since "$T_START") s (log: $LOG)"
