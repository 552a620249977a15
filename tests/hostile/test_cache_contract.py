"""The cache contract as a property (issue #38): every cache kernelpolicy writes lives in a
folder this user owns that no one else may write, and nothing in it is a link; a cache folder
another user could write is not used (R1: a venv planted in a cache folder others can write was
executed). The caches are found in the source (every ``cache_subdir("NAME")``), so a new cache
is covered or this test names it.
"""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from .helpers import SRC, cli

#: cache -> a command that writes it with no GPU, engine or network (None: written only with
#: an engine venv, a GPU probe or a download; its folder rule is tested where it is written)
WRITERS: dict[str, list[str] | None] = {
    "policies": ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--no-env"],
    "check": ["check"],
    "facts": ["facts", "--json"],
    "venvs": None,  # tests/hostile/test_round4.py (R1): `vllm venv`, `vllm audit`
    "simgpu": None,  # the engine harness (tests/vllm, tests/sglang)
    "wheels": None,  # the release scan's downloads
    "packages": None,  # the kernel packages' archives `releases/packages/_scan` reads for fixes
}


def _caches_in_the_source() -> set[str]:
    found = set()
    for path in (SRC / "kernelpolicy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "cache_subdir"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.add(str(node.args[0].value))
    return found


def test_every_cache_of_the_source_is_named_here() -> None:
    assert _caches_in_the_source() == set(WRITERS)


def _walk(root: Path) -> list[str]:
    """Every path under *root* that breaks the rule: a link, not this user's, or writable by others."""
    bad = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                bad.append(f"{path}: a link")
            elif st.st_uid != os.getuid():
                bad.append(f"{path}: owned by {st.st_uid}")
            elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and stat.S_ISDIR(st.st_mode):
                bad.append(f"{path}: a folder others may write ({oct(st.st_mode & 0o777)})")
            elif st.st_mode & stat.S_IWOTH:
                bad.append(f"{path}: a file anyone may write ({oct(st.st_mode & 0o777)})")
    return bad


WRITTEN = [(name, argv) for name, argv in WRITERS.items() if argv is not None]


@pytest.mark.parametrize(("cache", "argv"), WRITTEN, ids=[n for n, _ in WRITTEN])
def test_what_a_command_writes_keeps_the_rule(
    cache: str, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(root))
    old = os.umask(0o000)  # the most permissive process: the cache must still be private
    try:
        code, _out, err = cli(capsys, *argv)
    finally:
        os.umask(old)
    assert code in (0, 1, 3), err
    if cache != "facts":  # `facts` with no GPU may have nothing to keep
        assert (root / cache).is_dir(), f"`kernelpolicy {' '.join(argv)}` wrote no {cache} cache"
    assert _walk(root) == []


@pytest.mark.parametrize(("cache", "argv"), WRITTEN, ids=[n for n, _ in WRITTEN])
def test_a_cache_folder_others_may_write_is_not_used(
    cache: str, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "cache"
    planted = root / cache
    planted.mkdir(parents=True)
    planted.chmod(0o777)
    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(root))
    code, _out, err = cli(capsys, *argv)
    assert code in (0, 1, 3), err  # the command still works, without its cache
    assert list(planted.iterdir()) == [], f"`kernelpolicy {' '.join(argv)}` wrote into a folder others may write"
