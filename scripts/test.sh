#!/usr/bin/env bash
# Set up everything and run every test, from a fresh clone:
#   1. .venv with kernelpolicy (editable) and its test tools,
#   2. the vLLM and SGLang releases the integration tests run against, each in its own venv
#      cached under ~/.cache/kernelpolicy/venvs (built once, a few minutes each; reused after;
#      uv, from the test extra, hard-links them all from one cache there, so a wheel two
#      releases share is on disk once),
#   3. pytest over tests/ (arguments are passed on to pytest), on every core: pytest-xdist, one test
#      file per worker at a time (a file's engine runs are shared by its tests);
#      KERNELPOLICY_TEST_WORKERS=N sets the workers (0: one process); the exhaustive proof of the
#      shipped tables with the example operator policy is one of its tests (a few seconds: it is compiled).
# KERNELPOLICY_SKIP_VLLM=1 / KERNELPOLICY_SKIP_SGLANG=1 skip step 2 for that engine; its
# integration tests then skip with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [[ "${KERNELPOLICY_SKIP_VLLM:-0}" != 1 ]]; then
    # the releases are listed once, in tests/vllm/releases.txt (the tests read it too)
    while read -r version; do
        [[ -z "$version" || "$version" == \#* ]] && continue
        majmin="${version%.*}"
        python="$(scripts/vllm-venv.sh "$version")"
        export "KERNELPOLICY_VLLM_${majmin//./}_PYTHON=$python"
    done < tests/vllm/releases.txt
fi

if [[ "${KERNELPOLICY_SKIP_SGLANG:-0}" != 1 ]]; then
    # tests/sglang/releases.txt: the releases, listed once (tests/sglang/conftest.py reads it too)
    while read -r version; do
        [[ -z "$version" || "$version" == \#* ]] && continue
        python="$(scripts/sglang-venv.sh "$version")"
        export "KERNELPOLICY_SGLANG_${version//[^0-9]/}_PYTHON=$python"
    done < tests/sglang/releases.txt
fi

set +e
.venv/bin/python -m pytest -n "${KERNELPOLICY_TEST_WORKERS:-auto}" --dist loadfile "$@"
code=$?
set -e

if [[ $code -eq 5 ]]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit $code
