"""The README's table of environment variables: every KERNELPOLICY_* variable the code reads and
every engine variable the rules read, generated and in sync."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy._environment import KERNELPOLICY_VARIABLES, engine_variables, replace_table, table
from kernelpolicy.dsl.loader import discover, load_files

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"KERNELPOLICY_[A-Z0-9_]*[A-Z0-9]")
# a name built from a release (`KERNELPOLICY_VLLM_${majmin//./}_PYTHON` in a shell script)
_TEMPLATE = re.compile(r"KERNELPOLICY_[A-Z0-9_]*_\$\{[^}]*\}_[A-Z0-9_]*[A-Z0-9]")
# a listed name's placeholder (`<MAJMIN>`, `<VERSION>`) or a script's `${...}`
_HOLE = re.compile(r"<[A-Z]+>|\$\{[^}]*\}")


def _read_in(*folders: str) -> set[str]:
    names: set[str] = set()
    for folder in folders:
        for p in (ROOT / folder).rglob("*"):
            if (
                p.is_file()
                and p.suffix in (".py", ".sh", "")
                and "__pycache__" not in p.parts
                and (
                    p.name != "_environment.py"  # the list itself
                )
            ):
                text = p.read_text(encoding="utf-8", errors="replace")
                names |= set(_TEMPLATE.findall(text))
                names |= set(_NAME.findall(_TEMPLATE.sub("", text)))
    return names


def _matches(key: str, name: str) -> bool:
    """`name`, as read (a literal, or a script's template), is the listed `key`."""
    if _HOLE.sub("<>", name) == _HOLE.sub("<>", key) and "<>" in _HOLE.sub("<>", key):
        return True
    return (
        re.fullmatch(_HOLE.sub(lambda _m: r"\d+", re.escape(key).replace(r"\<", "<").replace(r"\>", ">")), name)
        is not None
    )


def _listed(name: str) -> bool:
    return any(_matches(k, name) for k in KERNELPOLICY_VARIABLES)


def test_every_variable_the_code_reads_is_listed_and_every_listed_one_is_read() -> None:
    found = _read_in("src/kernelpolicy", "scripts") - {"KERNELPOLICY_VLLM"}  # the prefix, in a docstring
    unlisted = sorted(n for n in found if not _listed(n))
    assert unlisted == [], "add these to kernelpolicy._environment.KERNELPOLICY_VARIABLES"
    stale = [k for k in KERNELPOLICY_VARIABLES if not any(_matches(k, n) for n in found)]
    assert stale == []


def test_readme_table_is_in_sync(policy: kp.Policy) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert replace_table(readme, table(policy)) == readme, "run `python -m kernelpolicy._docs`"


def test_engine_variables_come_from_the_rules(tmp_path: Path) -> None:
    extra = tmp_path / "p.yaml"
    extra.write_text(
        "rules:\n  - id: no-marlin-with-foo\n    when: {deploy.env.VLLM_FOO: '1'}\n    deny: marlin\n"
        "    severity: perf\n    because: a test\n    refs: [x#1]\n",
        encoding="utf-8",
    )
    policy = load_files(discover([extra], environ=False))
    got = engine_variables(policy)
    rule = policy.by_id["no-marlin-with-foo"]
    assert got["VLLM_FOO"] == [(next(iter(got["VLLM_FOO"]))[0], "deny `marlin`", rule.id, str(rule.origin))]
    assert "1" in got["VLLM_FOO"][0][0]
    assert "`VLLM_FOO`" in table(policy)
    shipped = engine_variables(kp.load_policy(environ=False))
    assert "VLLM_FOO" not in shipped and "VLLM_USE_DEEP_GEMM" in shipped


def test_markers_are_required() -> None:
    with pytest.raises(ValueError, match="markers"):
        replace_table("no table here", "x")


def test_the_table_names_the_other_tools_variables_that_matter() -> None:
    """Hugging Face, Ray and the engines' plugin lists change what kernelpolicy does: the README
    table names each (issue 25)."""
    from kernelpolicy._environment import BEGIN, END

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index(BEGIN) : readme.index(END)]
    for name in (
        "HF_HOME",
        "HF_HUB_CACHE",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_TOKEN",
        "HF_ENDPOINT",
        "RAY_ADDRESS",
        "XDG_CACHE_HOME",
        "VLLM_PLUGINS",
        "SGLANG_PLUGINS",
        "VLLM_USE_MODELSCOPE",
    ):
        assert f"| `{name}` |" in table, name


def test_a_deprecated_variable_is_one_kernelpolicy_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, "KERNELPOLICY_CACHE": str(tmp_path / "old"), "HF_HUB_OFFLINE": "1"}
    env.pop("KERNELPOLICY_CACHE_DIR", None)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelpolicy",
            "explain",
            "--no-env",
            "--gpu",
            "sm90",
            "--model-type",
            "llama",
            "--quant",
            "fp8_block",
            "--summary",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        "kernelpolicy: warning: `KERNELPOLICY_CACHE` is deprecated: set `KERNELPOLICY_CACHE_DIR`"
        " (the folder of every kernelpolicy cache)"
    ]
