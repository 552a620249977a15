"""The install lines kernelpolicy prints work from where it was installed (issue #36).

kernelpolicy is not on the package index: ``pip install 'kernelpolicy[vllm]'``, which every
``explain`` used to end with, fails there (or installs whoever registers the name). The line
comes from the distribution's ``direct_url.json`` (PEP 610) instead; these tests run
``kernelpolicy explain`` as a user would, with the distribution record pip would have written
for each way of installing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpolicy import _install

ROOT = Path(__file__).resolve().parents[1]
SEED = ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"]


def _explain(*argv: str, site: Path | None = None) -> str:
    """``kernelpolicy explain`` in a fresh process; with *site*, its distribution record first on
    the path (as pip would have left it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELPOLICY_", "VLLM_", "SGLANG_"))}
    env["HF_HUB_OFFLINE"] = "1"
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT / "src")])
    res = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", *argv], capture_output=True, text=True, env=env, check=False
    )
    assert res.returncode == 0, res.stderr
    return re.sub(r" \\\n +", " ", res.stdout)  # a command continued over lines, as the shell reads it


def _record(tmp_path: Path, direct_url: dict[str, object] | None) -> Path:
    """A site folder holding a ``kernelpolicy`` distribution record with *direct_url*."""
    site = tmp_path / "site"
    info = site / "kernelpolicy-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kernelpolicy\nVersion: 0.1.0\n", encoding="utf-8")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")
    return site


def test_explain_prints_no_index_install_line() -> None:
    """The finding: the default explain ends with an install line that fails."""
    out = _explain(*SEED)
    assert "pip install 'kernelpolicy[vllm]'" not in out
    plugin = out.splitlines()[out.splitlines().index("with the plugin, every path follows this decision:") + 1]
    assert plugin.strip() == _install.install_command("vllm")


def test_an_editable_checkout_prints_its_folder(tmp_path: Path) -> None:
    site = _record(tmp_path, {"url": ROOT.as_uri(), "dir_info": {"editable": True}})
    assert f"  pip install -e '{ROOT}[vllm]'\n" in _explain(*SEED, site=site)


def test_a_folder_install_prints_its_folder(tmp_path: Path) -> None:
    """README's first command (`pip install .`) records the clone's folder."""
    site = _record(tmp_path, {"url": ROOT.as_uri(), "dir_info": {}})
    assert f"  pip install '{ROOT}[vllm]'\n" in _explain(*SEED, site=site)


def test_a_vcs_install_prints_its_url_at_its_commit(tmp_path: Path) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    record = {"url": "https://git.example/acme/kernelpolicy.git", "vcs_info": {"vcs": "git", "commit_id": commit}}
    out = _explain(*SEED, "--explain=full", "--engine", "sglang==0.5.23", site=_record(tmp_path, record))
    assert f"pip install kernelpolicy@git+https://git.example/acme/kernelpolicy.git@{commit} (with SGLANG" in out


def test_a_wheel_from_a_url_prints_that_url(tmp_path: Path) -> None:
    url = "https://files.example/kernelpolicy-0.1.0-py3-none-any.whl"
    site = _record(tmp_path, {"url": url, "archive_info": {}})
    assert f"  pip install 'kernelpolicy[vllm]@{url}'\n" in _explain(*SEED, site=site)


def test_no_record_outside_a_checkout_says_the_index_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_install, "_direct_url", lambda: None)
    monkeypatch.setattr(_install, "_checkout", lambda: None)
    line = _install.install_command("vllm")
    assert line.startswith("pip install './kernelpolicy[vllm]'  # beside a clone of kernelpolicy's repository")
    assert "not on the package index" in line
    out = _render_notes_plugin()
    assert out[0] == "  pip install './kernelpolicy[vllm]'" and out[1].startswith("    # beside a clone")


def _render_notes_plugin() -> list[str]:
    """The plugin lines of the default explain text, rendered in this process."""
    import contextlib
    import io

    from kernelpolicy.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*SEED, "--no-env"]) == 0
    lines = buf.getvalue().splitlines()
    at = lines.index("with the plugin, every path follows this decision:")
    return lines[at + 1 : lines.index("", at)]


def test_a_folder_that_is_gone_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A path install whose folder was deleted (a temporary build folder) is not printed."""
    gone = tmp_path / "gone"
    monkeypatch.setattr(_install, "_direct_url", lambda: {"url": gone.as_uri(), "dir_info": {}})
    assert str(gone) not in _install.install_command("fmt")
