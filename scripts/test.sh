#!/usr/bin/env bash
# Set up everything and run every test, from a fresh clone:
#   1. .venv with kernelpolicy (editable) and its test tools,
#   2. the vLLM and SGLang releases the integration tests run against, each in its own venv
#      cached under ~/.cache/kernelpolicy/venvs (built once, a few minutes each; reused after;
#      uv, from the test extra, hard-links them all from one cache there, so a wheel two
#      releases share is on disk once),
#   3. pytest over tests/ (arguments are passed on to pytest).
# With no arguments, the exhaustive proof the suite holds (`check --strict --all-findings` of the
# shipped tables with the example operator policy: the suite's longest step) starts before step 2,
# in the background, and goes on while the venvs build and pytest runs: `check` keeps its proof as
# a certificate in kernelpolicy's cache and holds a lock while it computes it, so the test that
# runs the same check (tests/test_check.py, marked `last`: it runs after every other) waits for
# that walk and reads the certificate back instead of walking every cell again.
# KERNELPOLICY_SKIP_VLLM=1 / KERNELPOLICY_SKIP_SGLANG=1 skip step 2 for that engine; its
# integration tests then skip with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

proof=""
if [[ $# -eq 0 && "${KERNELPOLICY_NO_CACHE:-0}" != 1 ]]; then
    proof_log="$(mktemp "${TMPDIR:-/tmp}/kernelpolicy-proof.XXXXXX")"
    .venv/bin/kernelpolicy check --strict --all-findings policy/examples/fleet.yaml >"$proof_log" 2>&1 &
    proof=$!
fi

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
.venv/bin/python -m pytest "$@"
code=$?
set -e

if [[ -n "$proof" ]]; then
    # its outcome is the test's to judge (the certificate holds the findings); here only its line
    wait "$proof" || true
    echo "test.sh: the exhaustive proof (in the background): $(tail -n 1 "$proof_log")" >&2
    rm -f "$proof_log"
fi
if [[ $code -eq 5 ]]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit $code
