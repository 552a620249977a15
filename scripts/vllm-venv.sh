#!/usr/bin/env bash
# Create (or reuse) a cached virtual environment holding one vLLM release from PyPI.
#
#   scripts/vllm-venv.sh VERSION        e.g. scripts/vllm-venv.sh 0.26.0
#
# The venv lives in ${KERNELPOLICY_VENV_CACHE:-$HOME/.cache/kernelpolicy/venvs}/vllm-VERSION.
# A marker file is written only after a successful install and import check, so an
# interrupted build is removed and rebuilt on the next run.  On success the script
# prints the venv's python path as its last (and only stdout) line.
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 VLLM_VERSION" >&2
    exit 2
fi
version="$1"
if [[ ! "$version" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?([a-z0-9.+-]*)$ ]]; then
    echo "vllm-venv: not a version: $version" >&2
    exit 2
fi

cache="${KERNELPOLICY_VENV_CACHE:-$HOME/.cache/kernelpolicy/venvs}"
venv="$cache/vllm-$version"
marker="$venv/.kernelpolicy-ok"
python_bin="${KERNELPOLICY_VENV_BASE_PYTHON:-python3}"

if [[ -f "$marker" && -x "$venv/bin/python" ]]; then
    echo "$venv/bin/python"
    exit 0
fi

mkdir -p "$cache"
# Serialise concurrent builders of the same version.
exec 9>"$cache/.vllm-$version.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi
if [[ -f "$marker" && -x "$venv/bin/python" ]]; then
    echo "$venv/bin/python"
    exit 0
fi

if [[ -e "$venv" ]]; then
    echo "vllm-venv: removing incomplete venv $venv" >&2
    rm -rf "$venv"
fi

echo "vllm-venv: building $venv (vllm==$version; a few minutes)" >&2
"$python_bin" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2 || true
"$venv/bin/python" -m pip install "vllm==$version" "nvidia-ml-py" >&2
"$venv/bin/python" - "$version" >&2 <<'PY'
import importlib.metadata as md
import sys

want = sys.argv[1]
got = md.version("vllm")
if got != want:
    raise SystemExit(f"vllm-venv: installed vllm {got}, wanted {want}")
for dist in ("torch", "pydantic", "PyYAML", "packaging"):
    md.version(dist)
PY
printf 'vllm==%s\n' "$version" >"$marker"
echo "$venv/bin/python"
