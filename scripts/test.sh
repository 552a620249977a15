#!/usr/bin/env bash
# Set up everything and run every test, from a fresh clone:
#   1. .venv with kernelpolicy (editable) and its test tools,
#   2. the vLLM releases the integration tests run against, each in its own venv cached
#      under ~/.cache/kernelpolicy/venvs (built once, a few minutes each; reused after),
#   3. pytest over tests/ (arguments are passed on to pytest).
# KERNELPOLICY_SKIP_VLLM=1 skips step 2; the vLLM tests then skip with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [[ "${KERNELPOLICY_SKIP_VLLM:-0}" != 1 ]]; then
    KERNELPOLICY_VLLM_026_PYTHON="$(scripts/vllm-venv.sh 0.26.0)"
    KERNELPOLICY_VLLM_029_PYTHON="$(scripts/vllm-venv.sh 0.29.0)"
    KERNELPOLICY_VLLM_033_PYTHON="$(scripts/vllm-venv.sh 0.33.0)"
    export KERNELPOLICY_VLLM_026_PYTHON KERNELPOLICY_VLLM_029_PYTHON KERNELPOLICY_VLLM_033_PYTHON
fi

set +e
.venv/bin/python -m pytest "$@"
code=$?
set -e
if [[ $code -eq 5 ]]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit $code
