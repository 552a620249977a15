#!/usr/bin/env bash
# Create (or reuse) the cached virtual environment of one SGLang release from PyPI.
#
#   scripts/sglang-venv.sh VERSION        e.g. scripts/sglang-venv.sh 0.5.23
#
# A wrapper of `kernelpolicy sglang venv VERSION` (src/kernelpolicy/_venvs.py; the same builder
# as scripts/vllm-venv.sh: uv, hard-linked from the venvs' one uv cache). The venv's python path is the last (and
# only stdout) line.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
python_bin="$root/.venv/bin/python"
if [[ ! -x "$python_bin" ]]; then
    echo "sglang-venv: no $python_bin: run scripts/test.sh (or python3 -m venv .venv && .venv/bin/pip install -e .)" >&2
    exit 2
fi
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" exec "$python_bin" -m kernelpolicy sglang venv "$@"
