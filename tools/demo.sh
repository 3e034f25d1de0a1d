#!/usr/bin/env bash
# The main job: the training demo examples/train_gpt.py (examples/demo.py where it is absent), or
# the script given, with ember from source, in a venv (.venv) holding the lock's runtime
# dependencies. Fresh Debian/Ubuntu with Python >= 3.11.
#   ./tools/demo.sh [script.py [args...]]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${EMBER_PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "ember needs Python >= 3.11 as python3 (or set EMBER_PYTHON)" >&2
    exit 1
fi
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
    SUDO=""; [[ $(id -u) != 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv python3-pip >/dev/null
fi
VENV=.venv
[[ -x $VENV/bin/python ]] || "$PY" -m venv "$VENV"
# Runtime deps of core, autograd, compiler, export, pinned by the lock (no torch: demo needs none),
# and the demo's own: tqdm and matplotlib with its dependencies (the lock's demo section).
demo=$(sed -n '/^# --- demo/,/^$/p' requirements.lock | grep -E '^[A-Za-z0-9_.-]+==')
reqs=$(grep -E '^(numpy|ml-dtypes|sympy|mpmath|safetensors|packaging)==' requirements.lock; echo "$demo")
if [[ ! -f $VENV/.ember-deps ]] || [[ $(cat "$VENV/.ember-deps") != "$reqs" ]]; then
    echo "$reqs" | "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r /dev/stdin
    echo "$reqs" > "$VENV/.ember-deps"
fi
PYTHONPATH=$(printf '%s:' "$PWD"/packages/*/src)
export PYTHONPATH
main=examples/train_gpt.py
[[ -f $main ]] || main=examples/demo.py
exec "$VENV/bin/python" "${1:-$main}" "${@:2}"
