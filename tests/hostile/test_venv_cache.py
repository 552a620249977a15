"""Round four, R1: the venv cache follows the rule of every cache kernelpolicy keeps (folders of
this user's alone, nothing opened through a link): a venv another user could have planted is
never run by an audit nor printed by ``vllm venv``, and the builder writes through no link."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelpolicy import _venvs

from .helpers import cli_subprocess, one_error_line

M = ["--gpu", "GB10", "--model", "deepseek-ai/DeepSeek-V3"]


def _plant(cache: Path, venv: str, pwn: Path) -> Path:
    """The report's plant: a venv whose python touches *pwn*, marked built, the whole cache
    writable by everyone (and another user's, where this test may give it away)."""
    python = cache / "venvs" / venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\ntouch '{pwn}'\n")
    (cache / "venvs" / venv / ".kernelpolicy-ok").write_text("planted\n")
    for folder, dirs, files in os.walk(cache):
        for name in (folder, *(os.path.join(folder, d) for d in dirs), *(os.path.join(folder, f) for f in files)):
            os.chmod(name, 0o777)
            if os.geteuid() == 0:
                os.chown(name, 65534, 65534)  # nobody
    return python


@pytest.mark.parametrize(
    ("argv", "venv"),
    [
        (["vllm", "audit", "--vllm", "0.34.0", *M], "vllm-0.34.0"),
        (["sglang", "audit", "--sglang", "0.5.23", "--model", "deepseek-ai/DeepSeek-V3"], "sglang-0.5.23"),
        (["vllm", "venv", "0.34.0"], "vllm-0.34.0"),
        (["sglang", "venv", "0.5.23"], "sglang-0.5.23"),
    ],
)
def test_a_venv_planted_in_a_cache_others_may_write_is_never_run(
    cache_root: Path, tmp_path: Path, argv: list[str], venv: str
) -> None:
    pwn = tmp_path / "PWN"
    python = _plant(cache_root, venv, pwn)
    run = cli_subprocess(*argv)
    assert not pwn.exists(), "the planted python ran"
    assert run.returncode == 2
    assert str(python) not in run.stdout  # `vllm venv` printed it as the venv
    line = one_error_line(run.stderr)
    assert "is not this user's alone" in line and "venvs" in line


def test_a_venv_writable_by_others_in_an_owned_folder_is_not_run(cache_root: Path, tmp_path: Path) -> None:
    pwn = tmp_path / "PWN"
    venv = cache_root / "venvs" / "vllm-0.34.0"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f"#!/bin/sh\ntouch '{pwn}'\n")
    (venv / "bin" / "python").chmod(0o755)
    (venv / ".kernelpolicy-ok").write_text("vllm==0.34.0\n")
    (cache_root / "venvs").chmod(0o700)
    (venv / "bin").chmod(0o777)
    run = cli_subprocess("vllm", "audit", "--vllm", "0.34.0", *M)
    assert not pwn.exists() and run.returncode == 2
    assert "`0.34.0` venv" in one_error_line(run.stderr)


def test_a_venv_reached_through_a_link_is_not_run(cache_root: Path, tmp_path: Path) -> None:
    pwn = tmp_path / "PWN"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "bin").mkdir(parents=True)
    (elsewhere / "bin" / "python").write_text(f"#!/bin/sh\ntouch '{pwn}'\n")
    (elsewhere / "bin" / "python").chmod(0o755)
    (elsewhere / ".kernelpolicy-ok").write_text("vllm==0.34.0\n")
    (cache_root / "venvs").mkdir(mode=0o700)
    (cache_root / "venvs" / "vllm-0.34.0").symlink_to(elsewhere)
    run = cli_subprocess("vllm", "audit", "--vllm", "0.34.0", *M)
    assert not pwn.exists() and run.returncode == 2
    one_error_line(run.stderr)


@pytest.mark.parametrize("planted", [".vllm-0.34.0.constraints.txt", ".vllm-0.34.0.overrides.txt", ".vllm-0.34.0.lock"])
def test_the_builder_writes_through_no_link(
    cache_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """The report's victim became `cuda-python>=12.8`: the constraints file was written through a
    link planted beside the venvs (a uv that fails at once stands in for the build)."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    venvs = cache_root / "venvs"
    venvs.mkdir(mode=0o700)
    (venvs / planted).symlink_to(victim)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    run = cli_subprocess("vllm", "venv", "0.34.0", "--uv")
    assert victim.read_text() == "precious\n"
    assert run.returncode == 2 and run.stdout == ""
    one_error_line(run.stderr)
    if not planted.endswith(".lock"):  # the link is replaced by the file, written for uv
        assert not (venvs / planted).is_symlink()


def test_a_built_venv_is_this_users_alone(cache_root: Path) -> None:
    """A build under a umask of 002 still makes a venv that is then run (not one the group may write)."""

    def runner(cmd: Sequence[str]) -> int:
        if "venv" in cmd:
            python = Path(cmd[-1]) / "bin" / "python"
            python.parent.mkdir(parents=True)
            python.write_text("")
        return 0

    old = os.umask(0o002)
    try:
        python = _venvs.ensure_venv("0.33.0", use_uv=False, runner=runner)
    finally:
        os.umask(old)
    assert not stat.S_IMODE(python.parents[1].stat().st_mode) & 0o022
    assert _venvs.built_python("0.33.0") == python
