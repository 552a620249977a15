"""Round four, R6: ``fmt`` reads a file with the loader's guards before its round-trip YAML
library sees it. A nine-by-nine alias bomb under 1 KB took ruamel.yaml over 90 s of CPU, a
10,000-deep flow list and a NUL byte were internal errors; every command that loads rule files
refused them at once, with one line, and ``fmt`` now says the same line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .helpers import cli_subprocess, one_error_line

pytest.importorskip("ruamel.yaml")


def _bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "bomb.yaml": (_bomb(9), "bomb.yaml:1:5: error: anchors and aliases are not allowed in rule files"),
    "deep.yaml": ("rules: " + "[" * 10_000 + "]" * 10_000 + "\n", "deep.yaml:1:"),
    "nul.yaml": ("rules: []\x00\n", "nul.yaml:1:10: error: invalid YAML: character 0 is not allowed"),
    "tag.yaml": ("rules: !!python/object:os.system [x]\n", "tag.yaml:1:8: error: tag "),
    "nest.yaml": ("rules:\n" + "".join("  " * i + "- \n" for i in range(1, 100)), "nest.yaml:"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_fmt_refuses_what_the_loader_refuses_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    text, expected = HOSTILE[name]
    path = tmp_path / name
    path.write_bytes(text.encode())
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    run = cli_subprocess("fmt", "--check", name)
    assert time.monotonic() - started < 20  # the bomb alone took minutes
    assert run.returncode == 2
    line = one_error_line(run.stderr)
    assert expected in line, line
    # the line a command that loads the file as a policy says
    loaded = cli_subprocess("explain", "--gpu", "GB10", "--model", "deepseek-ai/DeepSeek-V3", "--policy", name)
    assert loaded.returncode == 2
    assert one_error_line(loaded.stderr).split(" (and ")[0] == line
    # `fmt` without --check leaves the file as it is
    assert cli_subprocess("fmt", name).returncode == 2
    assert path.read_bytes() == text.encode()
