"""A probe that crashes or hangs becomes a fact, never a crash of the caller (real children)."""

from __future__ import annotations

import sys
import textwrap
from typing import TYPE_CHECKING

from kernelpolicy.facts.providers import ScriptRun, run_script
from kernelpolicy.facts.providers._subprocess import interpret

if TYPE_CHECKING:
    from pathlib import Path


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "probe.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def test_real_segfault_is_reported(tmp_path: Path) -> None:
    argv = _script(
        tmp_path,
        """
        import os, signal
        print('KPROBE {"step": "import", "status": "ok"}', flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
        """,
    )
    run = run_script(argv, {}, 30)
    out = interpret(run)
    assert run.returncode == -11
    assert out.ended == "crashed"
    assert out.detail == "probe crashed: signal 11 (SIGSEGV)"
    assert out.step("import") == {"step": "import", "status": "ok"}


def test_real_timeout_kills_the_group(tmp_path: Path) -> None:
    argv = _script(
        tmp_path,
        """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
        """,
    )
    run = run_script(argv, {}, 0.5)
    assert run.timed_out
    assert run.seconds < 10
    out = interpret(run, "deep_gemm probe")
    assert out.ended == "timeout"
    assert out.detail.startswith("deep_gemm probe timed out after")


def test_error_exit_keeps_last_stderr_line() -> None:
    run = ScriptRun(1, "", "Traceback ...\nOSError: undefined symbol: c10::cuda::X\n")
    out = interpret(run)
    assert out.ended == "error"
    assert out.detail == "probe failed: exit status 1: OSError: undefined symbol: c10::cuda::X"


def test_shell_style_signal_status() -> None:
    assert interpret(ScriptRun(139, "", "")).detail == "probe crashed: signal 11 (SIGSEGV)"


def test_noise_and_bad_lines_are_skipped() -> None:
    stdout = 'noise\nKPROBE {bad json\nKPROBE ["not", "a", "dict"]\nKPROBE {"step": "x"}\n'
    out = interpret(ScriptRun(0, stdout, ""))
    assert out.ended == "ok"
    assert out.steps == ({"step": "x"},)
