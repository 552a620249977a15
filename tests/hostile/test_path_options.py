"""The reader contract as a property (issue #38): every option of the command line that takes a
path, generated from the CLI's own parser (a new option is covered without a line here), given
a FIFO, a device, a link to a FIFO, a file far larger than any input, or a folder, ends in a
documented exit status with at most one error line, never a traceback or an internal error, and
in seconds (a FIFO read without a bound hung ``facts`` and ``bench --report``; ``check
--sarif-file`` on a FIFO waited forever). An output path that is a FIFO, a link or a folder is
refused or replaced, never written through.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from kernelpolicy.cli import _parser

from .helpers import EXPLAIN_EXIT_CODES, cli

MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"
#: what a subcommand needs besides the path to reach the path's reader
BASE: dict[tuple[str, ...], list[str]] = {
    ("explain",): ["--gpu", "sm121", "--model", MODEL, "--no-env"],
    ("bench",): ["--gpu", "sm121", "--model", MODEL, "--plan"],
    ("fleet",): ["--model", MODEL],
    ("vllm", "audit"): ["--gpu", "sm121", "--model", MODEL],
    ("sglang", "audit"): ["--gpu", "sm121", "--model", MODEL],
}
#: options whose path is written, not read
OUTPUTS = ("sarif_file", "markdown", "out", "emit_policy", "write")
#: metavars of a path (a model is an id or a path)
PATHLIKE = ("FILE", "DIR", "PATH", "PYTHON", "FILES", "CASE", "OLD", "NEW")
#: options that name a folder to create or a base interpreter to build with: what they do with a
#: hostile path is checked elsewhere (tests/hostile/test_round4.py, the venv builder)
SKIPPED = {("vllm", "venv", "--python"), ("sglang", "venv", "--python"), ("facts", "--cache-dir")}
SECONDS = 20


def _options() -> Iterator[tuple[tuple[str, ...], str | None, str]]:
    """(subcommand, option string or None for a positional, dest) of every path argument."""

    def walk(
        prefix: tuple[str, ...], parser: argparse.ArgumentParser
    ) -> Iterator[tuple[tuple[str, ...], str | None, str]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk((*prefix, name), sub)
                continue
            metavar = str(action.metavar or "").upper()
            typed = getattr(action.type, "__name__", "") in ("Path", "PosixPath")
            if not (typed or any(m in metavar for m in PATHLIKE)) or metavar.startswith("-- "):
                continue
            option = action.option_strings[0] if action.option_strings else None
            if (*prefix, option) in SKIPPED:
                continue
            yield prefix, option, action.dest

    yield from walk((), _parser())


PATH_OPTIONS = sorted(set(_options()), key=lambda o: (o[0], o[1] or "", o[2]))


def test_the_generation_reaches_the_known_path_options() -> None:
    found = {(" ".join(p), o) for p, o, _ in PATH_OPTIONS}
    assert {("explain", "--policy"), ("check", "--sarif-file"), ("bench", "--report"), ("fleet", "--from")} <= found
    assert ("check", None) in found and ("diff", None) in found and ("explain", "--model") in found


def _hostile(kind: str, tmp_path: Path) -> str:
    fifo = tmp_path / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    if kind == "fifo":
        return str(fifo)
    if kind == "device":
        return "/dev/zero"
    if kind == "link-to-fifo":
        link = tmp_path / "link.yaml"
        link.symlink_to(fifo)
        return str(link)
    if kind == "huge":
        huge = tmp_path / "huge.yaml"
        with huge.open("wb") as f:
            f.truncate(4 * 1024**3)  # sparse: 4 GiB that no reader may take in
        return str(huge)
    assert kind == "folder"
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    return str(folder)


def _argv(prefix: tuple[str, ...], option: str | None, dest: str, path: str) -> list[str]:
    base = list(BASE.get(prefix, BASE.get(prefix[:1], [])))
    if option == "--model":
        base = [a for a in base if a not in (MODEL, "--model")]
    if dest == "emit_policy":
        base += ["--report", path]  # the report is read first: a FIFO as both
    if prefix == ("diff",) and option is None:
        return [*prefix, path, path]
    return [*prefix, *base, *([option, path] if option else [path])]


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


@pytest.mark.parametrize("kind", ["fifo", "device", "link-to-fifo", "huge", "folder"])
@pytest.mark.parametrize(
    ("prefix", "option", "dest"), PATH_OPTIONS, ids=[f"{' '.join(p)} {o or d}" for p, o, d in PATH_OPTIONS]
)
def test_a_hostile_path_is_one_line_in_seconds(
    prefix: tuple[str, ...],
    option: str | None,
    dest: str,
    kind: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if dest in OUTPUTS and kind in ("device", "huge"):
        pytest.skip("an output path is never a device here (the test runs as root: it would be replaced)")
    path = _hostile(kind, tmp_path)
    argv = _argv(prefix, option, dest, path)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS)
    try:
        code, _out, err = cli(capsys, *argv)
    except _Hang:
        pytest.fail(f"`kernelpolicy {' '.join(argv)}` did not end in {SECONDS} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert code in (*EXPLAIN_EXIT_CODES, 4), (argv, code, err)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    errors = [line for line in err.splitlines() if line.startswith("kernelpolicy") and "error: " in line]
    assert len(errors) <= 1, (argv, err)
    if code == 2:
        assert errors, (argv, err)  # bad input: its one line
    if kind in ("fifo", "link-to-fifo"):
        assert Path(tmp_path / "fifo").is_fifo()  # an output was not written through the FIFO's name


#: output options that write with no engine or GPU, and the argv that reaches the write
WRITES = {
    ("check", "--sarif-file"): ["check", "--sarif-file"],
    ("matrix", "--out"): ["matrix", "--format", "json", "--out"],
    ("schema", "--write"): ["schema", "--write"],
}


def test_every_output_option_is_named_here() -> None:
    """Each output option the parser has is checked below, or needs an engine or a GPU run."""
    outputs = {(p[0], o) for p, o, d in PATH_OPTIONS if d in OUTPUTS}
    needs_engine = {("vllm", "--markdown"), ("sglang", "--markdown"), ("bench", "--emit-policy")}
    assert outputs == set(WRITES) | needs_engine


@pytest.mark.parametrize("key", list(WRITES), ids=[" ".join(k) for k in WRITES])
def test_an_output_that_cannot_be_written_whole_keeps_the_old_file(key: tuple[str, str], tmp_path: Path) -> None:
    """Written at once (a temporary file, then renamed): a write stopped by a file-size limit
    leaves the old output as it was and says so in one line."""
    import resource
    import subprocess
    import sys

    from .helpers import SRC

    target = tmp_path / ("out" if key[0] != "schema" else "schemas")
    if key[0] == "schema":
        target.mkdir()
        (target / "rules.schema.json").write_text("OLD", encoding="utf-8")
        old = target / "rules.schema.json"
    else:
        target.write_text("OLD", encoding="utf-8")
        old = target

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    done = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", *WRITES[key], str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SRC), "KERNELPOLICY_CACHE_DIR": str(tmp_path / "cache")},
        preexec_fn=limit,
        check=False,
    )
    assert old.read_text(encoding="utf-8") == "OLD", done.stderr
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
