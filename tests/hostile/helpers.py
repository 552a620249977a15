"""Helpers of the hostile-input suite: run the command line, check its one-line errors."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kernelpolicy.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
SEED = ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"]
#: The exit statuses the command line documents.
EXIT_CODES = (0, 1, 2, 3)
#: ... and those of `explain`: 5, an explicit choice refused and another backend decided
#: (docs/design.md; `--moe-backend cutlass` on GB10, say)
EXPLAIN_EXIT_CODES = (*EXIT_CODES, 5)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command line in this process: exit status, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_subprocess(
    *argv: str, timeout: float = 60, stdout: int | None = subprocess.PIPE, close_stdout: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m kernelpolicy`` in a child with a timeout (for input that could hang);
    *close_stdout* starts it with standard output closed (``>&-``)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, "-m", "kernelpolicy", *argv]
    if close_stdout:
        cmd = ["sh", "-c", 'exec "$@" >&-', "sh", *cmd]
    return subprocess.run(cmd, check=False, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)


def one_error_line(err: str) -> str:
    """The one line of a failed command's stderr (and that there is exactly one, no traceback)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def bench_hostile() -> ModuleType:
    """``benchmarks/bench_hostile.py`` as a module (its round-four input generators), loaded once."""
    if "bench_hostile" in sys.modules:
        return sys.modules["bench_hostile"]
    path = SRC.parent / "benchmarks" / "bench_hostile.py"
    spec = importlib.util.spec_from_file_location("bench_hostile", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_hostile"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
