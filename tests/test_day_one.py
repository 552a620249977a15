"""Day one: every command the docs show with its output runs, and prints what the docs say.

The convention (docs/verification.md, "Docs that run"): in README.md and docs/*.md, a fenced
block whose first line starts with ``$ `` shows commands and their output. Each ``$ `` line is
run from the repository root with ``bash`` (``kernelpolicy`` is this checkout's), offline
(``HF_HUB_OFFLINE=1``, an empty Hugging Face cache holding only :data:`HF_CACHE`'s configs, a
fresh kernelpolicy cache, no ``KERNELPOLICY_*``, ``VLLM_*`` or ``SGLANG_*`` variables), and
what it prints (stdout then stderr, merged) must be the lines below it, where

- a line ``...`` (or ``...`` then spaces and a comment) stands for any number of lines, and
- ``…`` inside a line stands for any text within that line (a fingerprint, a duration).

A block that cannot run here (it needs a GPU, an engine venv, a Ray cluster, minutes) has the
line ``<!-- day-one: skip (why) -->`` just above its fence; :data:`SKIPPED` counts those marks,
so a new one is a deliberate change. In ``sh`` blocks of the README, each ``kernelpolicy explain``
line without a placeholder runs too and must decide (exit 0, 3 or 5, no error line).

A failure names the file and line of the block, the command, and the first line that differs,
so the docs can be refreshed from it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
#: Blocks marked ``<!-- day-one: skip (why) -->``: change it with the marks.
SKIPPED = 6
_SKIP = re.compile(r"^<!-- day-one: skip \((?P<why>[^)]+)\) -->$")
_FENCE = re.compile(r"^\s*```")
_PLACEHOLDER = re.compile(r"\.\.\.|\b(?:SPEC|ID_OR_PATH|FILES?|OLD|NEW|X\.Y\.Z)\b|[\[\]|]|\./my-|serve\.yaml")


def _hf_cache_configs() -> dict[str, object]:
    """Model ids outside the catalog the docs decide "from the local Hugging Face cache"."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from models import configs as c
    finally:
        sys.path.pop(0)
    return {"Qwen/Qwen3-30B-A3B-Instruct-2507-FP8": c.QWEN3_30B_A3B_FP8}


@dataclass(frozen=True)
class Command:
    line: str  #: the command, without ``$ ``
    expected: tuple[str, ...]
    at: int  #: 1-based line of the ``$`` line in its file


@dataclass(frozen=True)
class Block:
    file: str
    line: int  #: 1-based line of the opening fence
    info: str
    body: tuple[str, ...]
    skip: str | None  #: the reason of a ``day-one: skip`` mark

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def shows_output(self) -> bool:
        return bool(self.body) and self.body[0].startswith("$ ")

    def commands(self) -> list[Command]:
        out: list[Command] = []
        for i, text in enumerate(self.body):
            if text.startswith("$ "):
                out.append(Command(text[2:], (), self.line + 1 + i))
            elif out:
                last = out[-1]
                out[-1] = Command(last.line, (*last.expected, text), last.at)
        return out


def blocks() -> list[Block]:
    found: list[Block] = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if not _FENCE.match(lines[i]):
                i += 1
                continue
            info = lines[i].strip()[3:].strip()
            end = next((j for j in range(i + 1, len(lines)) if _FENCE.match(lines[j])), len(lines))
            mark = _SKIP.match(lines[i - 1].strip()) if i > 0 else None
            rel = str(path.relative_to(ROOT))
            found.append(Block(rel, i + 1, info, tuple(lines[i + 1 : end]), mark.group("why") if mark else None))
            i = end + 1
    return found


SHOWN = [b for b in blocks() if b.shows_output]


def _pattern(expected: tuple[str, ...]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line.strip() == "..." or re.match(r"^\.\.\.\s", line):
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.rstrip().split("…")) + r"[ \t]*\n")
    return re.compile("".join(parts) + r"\Z", re.S)


def _first_difference(expected: tuple[str, ...], got: list[str]) -> str:
    """Where *got* first leaves *expected* (elisions skip ahead to the next line that matches)."""
    g = 0
    for n, line in enumerate(expected, 1):
        if line.strip() == "..." or re.match(r"^\.\.\.\s", line):
            following = next((x for x in expected[n:] if x.strip() != "..."), None)
            if following is None:
                return ""
            pat = _pattern((following,))
            while g < len(got) and not pat.match(got[g] + "\n"):
                g += 1
            continue
        have = got[g] if g < len(got) else "<no more output>"
        if not _pattern((line,)).match(have + "\n"):
            return f"output line {n} differs:\n  docs: {line!r}\n  got:  {have!r}"
        g += 1
    if g < len(got):
        return f"more output than the docs show, from line {g + 1}: {got[g]!r}"
    return ""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A new user's offline shell: this checkout's `kernelpolicy` first on PATH."""
    import json
    import shutil

    cache = tmp_path_factory.mktemp("hf-cache")
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from models.conftest import write_cache
    finally:
        sys.path.pop(0)
    for repo, config in _hf_cache_configs().items():
        write_cache(cache, repo, {"config.json": json.loads(json.dumps(config))})
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KERNELPOLICY_", "VLLM_", "SGLANG_", "HF_")) and k != "TRANSFORMERS_OFFLINE"
    }
    scripts = str(Path(sys.executable).parent)
    assert shutil.which("kernelpolicy", path=scripts), "no kernelpolicy script beside python"
    return {
        **base,
        "PATH": scripts + os.pathsep + base.get("PATH", ""),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(cache),
        "KERNELPOLICY_CACHE_DIR": str(tmp_path_factory.mktemp("kp-cache")),
        "COLUMNS": "80",
    }


def _run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command + " 2>&1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_skip_marks_are_counted() -> None:
    marked = [f"{b.id} ({b.skip})" for b in blocks() if b.skip is not None]
    assert len(marked) == SKIPPED, "day-one skip marks changed; update SKIPPED:\n" + "\n".join(marked)
    assert all(b.shows_output for b in blocks() if b.skip is not None), "a skip mark above a block that shows no output"


@pytest.mark.parametrize("block", SHOWN, ids=[b.id for b in SHOWN])
def test_documented_output_is_what_the_command_prints(block: Block, env: dict[str, str]) -> None:
    if block.skip is not None:
        pytest.skip(f"marked day-one: skip ({block.skip})")
    for cmd in block.commands():
        res = _run(cmd.line, env)
        got = res.stdout.rstrip("\n").splitlines()
        if _pattern(cmd.expected).match(res.stdout.rstrip("\n") + "\n" if res.stdout.strip() else ""):
            continue
        where = _first_difference(cmd.expected, got) or "the output does not match"
        pytest.fail(
            f"{block.file}:{cmd.at}: `$ {cmd.line}` (exit {res.returncode}): {where}\n"
            "--- what it prints now (paste it over the block, eliding with `...`/`…` where it varies):\n"
            + "\n".join(got),
            pytrace=False,
        )


README_COMMANDS = [
    (b.id, line.split("  #")[0].strip())
    for b in blocks()
    if b.file == "README.md" and b.info == "sh"
    for line in b.body
    if line.startswith("kernelpolicy explain") and not _PLACEHOLDER.search(line.split("  #")[0])
]


def test_readme_lists_commands_that_run() -> None:
    assert len(README_COMMANDS) >= 3, README_COMMANDS


@pytest.mark.parametrize(("where", "command"), README_COMMANDS, ids=[c for _w, c in README_COMMANDS])
def test_readme_commands_decide(where: str, command: str, env: dict[str, str]) -> None:
    res = _run(command, env)
    assert res.returncode in (0, 3, 5), f"{where}: `{command}` exited {res.returncode}:\n{res.stdout}"
    assert "error:" not in res.stdout, f"{where}: `{command}`:\n{res.stdout}"
