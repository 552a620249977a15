"""Hostile input, round three (N2): shell completion never runs code named by a cache folder.

A shared Hugging Face cache (NFS, `--download-dir`) lets another user name a folder
``models--a--b$(touch PWN)``; `compgen -W` expanded each completion word, so pressing TAB
after ``--model`` ran the command. Values are now data: only repo ids are listed, and the
bash script compares and inserts them without expansion.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpolicy.cli import _parser
from kernelpolicy.tools.completion import hf_cache_models, is_repo_id, script

BIN = Path(sys.executable).parent
needs_cli = pytest.mark.skipif(not (BIN / "kernelpolicy").exists(), reason="no kernelpolicy script beside python")

#: folder names a hostile user can create in a shared hub cache; none is a model
HOSTILE_FOLDERS = (
    "models--a--b$(touch PWN)",
    "models--x--y`touch PWN`",
    "models--x--$HOME",
    "models--x--y;touch PWN",
    "models--x--y&&touch PWN",
    "models--x--y|touch PWN",
    "models--x--y>PWN",
    "models--x--y\\$(touch PWN)",
    "models--x--y'$(touch PWN)'",
    'models--x--y"$(touch PWN)"',
    "models--x--y\x1b[2J",
    "models--x--y z",
    "models--x--{a,b}",
    "models--x--y*",
    "models--x--..",
    "models--x--a--b--c",
    "models--x--" + "a" * 200,
    "models--é--y",
)


def _hub(tmp_path: Path) -> Path:
    hub = tmp_path / "hub"
    for name in (*HOSTILE_FOLDERS, "models--acme--Tiny-FP8", "models--gpt2"):
        (hub / name).mkdir(parents=True, exist_ok=True)
    return hub


def test_only_repo_ids_are_listed(tmp_path: Path) -> None:
    assert hf_cache_models({"HF_HUB_CACHE": str(_hub(tmp_path))}) == ["acme/Tiny-FP8", "gpt2"]


@pytest.mark.parametrize("name", [f[len("models--") :].replace("--", "/", 1) for f in HOSTILE_FOLDERS])
def test_hostile_names_are_not_repo_ids(name: str) -> None:
    assert not is_repo_id(name)


def _complete(tmp_path: Path, words: list[str], *, hub: Path | None = None, lister: str | None = None) -> list[str]:
    """COMPREPLY of the bash script for *words* (run in *tmp_path*, where a PWN file would land)."""
    script_file = tmp_path / "kp.bash"
    script_file.write_text(script("bash", _parser()), encoding="utf-8")
    arr = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    if hub is not None:
        env["HF_HUB_CACHE"] = str(hub)
    if lister is not None:  # a stand-in `kernelpolicy` that prints these values
        fake = tmp_path / "bin"
        fake.mkdir(exist_ok=True)
        (fake / "kernelpolicy").write_text(f"#!/bin/sh\nprintf '%s\\n' {lister}\n", encoding="utf-8")
        (fake / "kernelpolicy").chmod(0o755)
        env["PATH"] = f"{fake}{os.pathsep}{env['PATH']}"
    cmd = (
        f"source {script_file}; COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; _kernelpolicy; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, check=True, cwd=tmp_path)
    return [ln for ln in res.stdout.splitlines() if ln]


@needs_cli
def test_tab_after_model_runs_nothing(tmp_path: Path) -> None:
    got = _complete(tmp_path, ["kernelpolicy", "explain", "--model", ""], hub=_hub(tmp_path))
    assert not (tmp_path / "PWN").exists()
    assert "acme/Tiny-FP8" in got and not any("PWN" in g for g in got)


def test_values_are_inserted_quoted_never_expanded(tmp_path: Path) -> None:
    # even a value that got past the filters (a catalog entry, a future kind) is data
    lister = "'$(touch PWN)' '`touch PWN`' 'RTX 5090' 'Blackwell Ultra' '$HOME'"
    got = _complete(tmp_path, ["kernelpolicy", "explain", "--gpu", ""], lister=lister)
    assert not (tmp_path / "PWN").exists()
    assert got == ["\\$\\(touch\\ PWN\\)", "\\`touch\\ PWN\\`", "RTX\\ 5090", "Blackwell\\ Ultra", "\\$HOME"]
    assert _complete(tmp_path, ["kernelpolicy", "explain", "--gpu", "RTX\\ 5"], lister=lister) == ["RTX\\ 5090"]
    assert _complete(tmp_path, ["kernelpolicy", "explain", "--gpu", "$("], lister=lister) == ["\\$\\(touch\\ PWN\\)"]
