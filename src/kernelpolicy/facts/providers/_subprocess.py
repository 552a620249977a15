"""Run a probe script in a child process and read what it reported, whatever became of it.

The child prints one line ``KPROBE {json}`` per finished step. A crash (a signal), a
timeout or a non-zero exit becomes data (:class:`ProbeOutcome`), never an exception here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._base import ScriptRun

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["MARKER", "ProbeOutcome", "interpret", "run_script", "script_path"]

MARKER = "KPROBE "
_SCRIPTS = Path(__file__).resolve().parent / "_scripts"


def script_path(name: str) -> str:
    """The file of a shipped probe script (run by path: the child needs no kernelpolicy)."""
    return str(_SCRIPTS / name)


def run_script(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> ScriptRun:
    """Run *argv* in its own process group; kill the whole group when *timeout* passes."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        out, err = proc.communicate()
        return ScriptRun(None, out, err, timed_out=True, seconds=time.monotonic() - start)
    return ScriptRun(proc.returncode, out, err, seconds=time.monotonic() - start)


@dataclass(frozen=True)
class ProbeOutcome:
    """The reported steps of a probe, and how the child ended."""

    steps: tuple[dict[str, object], ...]
    ended: str  #: ``ok``, ``crashed``, ``timeout`` or ``error``
    detail: str  #: one human line: ``probe crashed: signal 11 (SIGSEGV)``; empty when ok

    def step(self, name: str) -> dict[str, object] | None:
        """The last report of the step called *name*, if it got that far."""
        for s in reversed(self.steps):
            if s.get("step") == name:
                return s
        return None


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return "unknown signal"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def interpret(run: ScriptRun, what: str = "probe") -> ProbeOutcome:
    """Pure: the steps a child reported and a one-line account of how it ended."""
    steps: list[dict[str, object]] = []
    for line in run.stdout.splitlines():
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                steps.append(data)
    if run.timed_out:
        return ProbeOutcome(tuple(steps), "timeout", f"{what} timed out after {run.seconds:.0f} s")
    rc = run.returncode
    if rc is not None and rc < 0:
        detail = f"{what} crashed: signal {-rc} ({_signal_name(-rc)})"
        return ProbeOutcome(tuple(steps), "crashed", detail)
    if rc is not None and rc > 128 and rc - 128 in {s.value for s in signal.Signals}:
        # a shell or runner that reports death by signal as 128+N
        detail = f"{what} crashed: signal {rc - 128} ({_signal_name(rc - 128)})"
        return ProbeOutcome(tuple(steps), "crashed", detail)
    if rc != 0:
        last = _last_line(run.stderr)
        detail = f"{what} failed: exit status {rc}" + (f": {last}" if last else "")
        return ProbeOutcome(tuple(steps), "error", detail)
    return ProbeOutcome(tuple(steps), "ok", "")
