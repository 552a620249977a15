"""From a fresh install of the wheel (not the source tree): the schemas ship, `kernelpolicy
schema`, `completion`, the pre-commit hook's command and the Action's annotations work."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The wheel built from this checkout, installed into a folder of its own (dependencies
    from the test environment), and an environment that runs it instead of the source tree."""
    tmp = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if build.returncode != 0:
        pytest.skip(f"cannot build the wheel here: {build.stderr.strip().splitlines()[-1:]}")
    (wheel,) = (tmp / "dist").glob("kernelpolicy-*.whl")
    target = tmp / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    deps = sysconfig.get_paths()["purelib"]
    env = {
        **os.environ,
        "PYTHONPATH": f"{target}{os.pathsep}{deps}",
        "PYTHONNOUSERSITE": "1",
        "PATH": f"{target / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("KERNELPOLICY_POLICY", None)
    where = subprocess.run(
        [sys.executable, "-c", "import kernelpolicy; print(kernelpolicy.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(target)), where
    return tmp, env


def _kp(installed: tuple[Path, dict[str, str]], *argv: str) -> subprocess.CompletedProcess[str]:
    tmp, env = installed
    return subprocess.run(
        [sys.executable, "-m", "kernelpolicy", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        check=False,
        timeout=300,
    )


def test_schemas_ship_and_match(installed: tuple[Path, dict[str, str]]) -> None:
    tmp, env = installed
    code = (
        "from kernelpolicy.tools.schemas import SCHEMA_NAMES, render, shipped_path\n"
        "for n in SCHEMA_NAMES:\n"
        "    p = shipped_path(n)\n"
        "    assert '_data' in p.parts and p.read_text() == render(n), n\n"
        "print('ok')"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp, check=False)
    assert res.stdout.strip() == "ok", res.stderr
    out = _kp(installed, "schema", "rules")
    assert out.returncode == 0 and json.loads(out.stdout)["title"] == "kernelpolicy rule or policy file"


def test_completion_from_the_wheel(installed: tuple[Path, dict[str, str]]) -> None:
    out = _kp(installed, "completion", "bash")
    assert out.returncode == 0 and "complete -o default -F _kernelpolicy kernelpolicy" in out.stdout
    gpus = _kp(installed, "completion", "--list", "gpus")
    assert "GB10" in gpus.stdout.splitlines()


def test_pre_commit_hook_and_action_from_the_wheel(installed: tuple[Path, dict[str, str]]) -> None:
    tmp, _ = installed
    bad = tmp / "policy.yaml"
    bad.write_text("rules:\n  - id: x\n    deny: tritn\n    because: typo\n", encoding="utf-8")
    hook = next(
        h
        for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
        if h["id"] == "kernelpolicy-check"
    )
    argv = [*shlex.split(hook["entry"])[1:], *hook.get("args", []), "--no-coverage", str(bad)]
    res = _kp(installed, *argv)
    assert res.returncode == 1 and "tritn" in res.stdout
    gh = _kp(installed, "check", "--no-coverage", "--format", "github", str(bad))
    assert gh.returncode == 1
    (line,) = [ln for ln in gh.stdout.splitlines() if ln.startswith("::error ") and "tritn" in ln]
    assert f"file={bad}" in line and ",line=3,col=11," in line and "did you mean `triton`" in line
