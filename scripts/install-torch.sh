#!/usr/bin/env bash
# Installs torch (a CPU build) and transformers for the reference engine (clients/reference-engine)
# and the RL demo into a virtual environment, .polar/torch-venv by default (POLAR_TORCH_VENV
# changes it). A venv that already imports both is left alone, so a second run does nothing.
#
# pip uses the package indexes configured on this machine (`pip config`) as its only indexes when
# there are any, so it never spends minutes retrying an unreachable default one. It first asks for
# the pinned CPU build (clients/reference-engine/requirements-cpu.txt); where the index has no
# such build, for any torch and transformers it has.
#
#   bash scripts/install-torch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${POLAR_TORCH_VENV:-.polar/torch-venv}"
PY="${PYTHON:-python3}"
REQ=clients/reference-engine/requirements-cpu.txt

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torch, transformers, pytest' 2>/dev/null; then
  echo "torch and transformers already installed in $VENV"
  exit 0
fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "install-torch: $PY must be Python 3.10 or newer" >&2
  exit 2
fi
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"

idx=$("$PY" -m pip config get global.extra-index-url 2>/dev/null | tr '\n' ' ' | xargs || true)
if [ -n "$idx" ]; then
  export PIP_INDEX_URL="${idx%% *}"
  rest="${idx#* }"
  [ "$rest" != "$idx" ] && export PIP_EXTRA_INDEX_URL="$rest"
fi
pip_install() { "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@"; }
started=$(date +%s)
echo "install-torch: pip install -r $REQ into $VENV"
if ! pip_install -r "$REQ"; then
  echo "install-torch: the pinned CPU build is not available here; installing torch and transformers from the index"
  pip_install torch transformers pytest
fi
versions=$("$VENV/bin/python" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')
echo "install-torch: $versions in $VENV ($(( $(date +%s) - started )) s)"
