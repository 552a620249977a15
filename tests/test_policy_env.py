"""`KERNELPOLICY_POLICY` is read by every command, through one reader (issue #36).

Found as: `KERNELPOLICY_POLICY=acme.yaml kernelpolicy check` said "0 errors" without loading the
file, `matrix` showed a backend the policy denies, and `diff` compared the two sides without it,
while `explain`, `fleet` and the engine plugins loaded it. Each command runs here as a user
would: a fresh process with the variable set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BROKEN = ROOT / "tests" / "check" / "unknown-backend.yaml"  # `deny: tritn`
DENY_TRITON_GB10 = ROOT / "tests" / "diff" / "new" / "deny-triton-gb10.yaml"


def kp(*argv: str, policy: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELPOLICY_", "VLLM_", "SGLANG_"))}
    env["HF_HUB_OFFLINE"] = "1"
    if policy is not None:
        env["KERNELPOLICY_POLICY"] = str(policy)
    return subprocess.run(
        [sys.executable, "-m", "kernelpolicy", *argv], capture_output=True, text=True, env=env, check=False, cwd=ROOT
    )


def test_check_loads_the_variables_files() -> None:
    res = kp("check", "--no-coverage", "--json", policy=BROKEN)
    assert res.returncode == 1, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert str(BROKEN) in doc["files"]
    (finding,) = [f for f in doc["findings"] if f["rule"] == "misspelt-backend"]
    assert finding["file"] == str(BROKEN) and "tritn" in finding["message"]


def test_check_text_names_the_finding_in_the_variables_file() -> None:
    res = kp("check", "--no-coverage", policy=BROKEN)
    assert res.returncode == 1
    assert res.stdout.startswith(f"{BROKEN}:4:11: error: no path has a backend `tritn`")


def test_check_bare_reads_only_its_files() -> None:
    """`--bare` checks FILES alone: the variable's files are not stacked under them."""
    res = kp("check", "--bare", "--no-coverage", "--json", str(DENY_TRITON_GB10), policy=BROKEN)
    assert str(BROKEN) not in json.loads(res.stdout)["files"]


def test_matrix_applies_the_variables_policy() -> None:
    def gb10_moe(policy: Path | None) -> set[str | None]:
        res = kp("matrix", "--format", "json", policy=policy)
        assert res.returncode == 0, res.stderr
        cells = json.loads(res.stdout)["cells"]
        return {c["backend"] for c in cells if c["sm"] == "sm121" and c["path"] == "moe" and c["present"]}

    assert "triton" in gb10_moe(None)
    assert "triton" not in gb10_moe(DENY_TRITON_GB10)


def test_diff_stacks_the_variables_files_under_both_sides(tmp_path: Path) -> None:
    """The variable's files are loaded under OLD and NEW (a broken one fails both)."""
    res = kp("diff", str(DENY_TRITON_GB10), str(DENY_TRITON_GB10), policy=BROKEN)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith(f"kernelpolicy: {BROKEN}:4:11: error: no path has a backend `tritn`")
    assert kp("diff", str(DENY_TRITON_GB10), str(DENY_TRITON_GB10), policy=tmp_path / "gone.yaml").returncode == 2


def test_diff_of_the_variables_own_file_replaces_it(tmp_path: Path) -> None:
    """`KERNELPOLICY_POLICY=acme.yaml kernelpolicy diff acme.yaml acme-new.yaml`: OLD is the file
    the variable names, so it is not stacked under the sides again (its ids would be duplicates)."""
    res = kp("diff", str(DENY_TRITON_GB10), str(DENY_TRITON_GB10), policy=DENY_TRITON_GB10)
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith(": 0 path decisions change")


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--no-coverage"],
        ["matrix"],
        ["diff", "policy", "policy"],
        ["knowledge", "stale"],
        ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"],
    ],
    ids=lambda a: a[0],
)
def test_a_missing_file_the_variable_names_is_one_line_naming_the_variable(tmp_path: Path, argv: list[str]) -> None:
    gone = tmp_path / "acme.yaml"
    res = kp(*argv, policy=gone)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (
        f"kernelpolicy: error: no such file `{gone}` (named by KERNELPOLICY_POLICY)"
        f" (fix or unset KERNELPOLICY_POLICY: a list of policy files separated by `{os.pathsep}`)\n"
    )
