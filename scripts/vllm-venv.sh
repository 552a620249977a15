#!/usr/bin/env bash
# Create (or reuse) the cached virtual environment of one vLLM release from PyPI.
#
#   scripts/vllm-venv.sh VERSION        e.g. scripts/vllm-venv.sh 0.26.0
#
# A wrapper of `kernelpolicy vllm venv VERSION` (src/kernelpolicy/_venvs.py), which a
# pip-installed kernelpolicy has too: the venv lives in the venvs folder of kernelpolicy's cache
# ($KERNELPOLICY_CACHE_DIR/venvs, default ~/.cache/kernelpolicy/venvs), is built with uv when it
# is on PATH (pip otherwise), and is marked complete only after an install and import check, so
# an interrupted build is removed and rebuilt on the next run. The venv's python path is the
# last (and only stdout) line.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
python_bin="$root/.venv/bin/python"
if [[ ! -x "$python_bin" ]]; then
    echo "vllm-venv: no $python_bin: run scripts/test.sh (or python3 -m venv .venv && .venv/bin/pip install -e .)" >&2
    exit 2
fi
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" exec "$python_bin" -m kernelpolicy vllm venv "$@"
