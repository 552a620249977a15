"""The editor set-up the docs and ``editors/`` ship: each names the real command (``kernelpolicy
lsp``, a subcommand of this checkout's command line), the YAML language, and no path of a machine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors" / "vscode"
DOCS = ROOT / "docs" / "editors.md"
#: An absolute path of some machine: a home, a venv, a system folder, a drive.
_MACHINE_PATH = re.compile(r"(?:^|[\s\"'=(])(?:/home/|/Users/|/usr/|/opt/|/tmp/|/root/|[A-Za-z]:\\)")


def _blocks(info: str) -> list[str]:
    """The fenced blocks of docs/editors.md whose info string is *info*."""
    return re.findall(r"^```" + info + r"\n(.*?)^```", DOCS.read_text(), flags=re.M | re.S)


def test_lsp_is_a_subcommand_of_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", "lsp", "--help"], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "Language Server Protocol" in done.stdout, done.stderr


def test_the_vscode_manifest_starts_kernelpolicy_lsp_for_yaml() -> None:
    manifest = json.loads((VSCODE / "package.json").read_text())
    assert manifest["main"] == "./extension.js" and (VSCODE / "extension.js").is_file()
    assert manifest["activationEvents"] == ["onLanguage:yaml"]
    settings = manifest["contributes"]["configuration"]["properties"]
    assert settings["kernelpolicy.server.command"]["default"] == ["kernelpolicy", "lsp"]
    assert settings["kernelpolicy.policy"]["default"] == []
    assert "vscode-languageclient" in manifest["dependencies"]
    code = (VSCODE / "extension.js").read_text()
    # the extension reads those settings, selects YAML files, and passes the policy files on
    assert 'config.get("server.command", ["kernelpolicy", "lsp"])' in code
    assert 'language: "yaml"' in code and 'initializationOptions: { policy: config.get("policy", []) }' in code
    assert 'configurationSection: "kernelpolicy"' in code  # didChangeConfiguration: {"kernelpolicy": {...}}


def test_the_neovim_and_helix_snippets_name_the_real_command() -> None:
    [lua] = _blocks("lua")
    assert 'cmd = { "kernelpolicy", "lsp" }' in lua and 'filetypes = { "yaml" }' in lua
    assert 'vim.lsp.config("kernelpolicy"' in lua and 'vim.lsp.enable("kernelpolicy")' in lua
    [toml] = _blocks("toml")
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    helix = tomllib.loads(toml)
    assert helix["language-server"]["kernelpolicy"]["command"] == "kernelpolicy"
    assert helix["language-server"]["kernelpolicy"]["args"] == ["lsp"]
    assert helix["language"][0]["name"] == "yaml" and "kernelpolicy" in helix["language"][0]["language-servers"]


def test_the_json_snippets_are_json_and_the_schema_association_is_relative() -> None:
    snippets = [json.loads(b) for b in _blocks("json")]
    assert {"kernelpolicy": {"policy": ["policy/fleet.yaml", "policy/team"]}} in snippets
    [schemas] = [s["yaml.schemas"] for s in snippets if "yaml.schemas" in s]
    assert list(schemas) == ["./schemas/rules.schema.json"] and (ROOT / "schemas" / "rules.schema.json").is_file()
    for text in (DOCS.read_text(), *(p.read_text() for p in VSCODE.iterdir() if p.is_file())):
        assert not _MACHINE_PATH.search(text), _MACHINE_PATH.search(text)
