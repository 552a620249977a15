"""Progress on stderr for steps that take seconds (``check``, ``diff``, ``vllm audit``, building
a vLLM environment), only when stderr is a terminal: pipes, files and CI logs get nothing.

``with progress("checking"):`` shows ``kernelpolicy: checking ... 3.2 s`` on one line, updated a
few times a second from a daemon thread, and erases it when the step ends, so the step's own
output is not interleaved with it. :meth:`Progress.note` changes the text (``building vllm 0.26.0:
installing``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, TextIO

__all__ = ["Progress", "progress"]

_FRAMES: Final = "|/-\\"
_DELAY: Final = 0.5  #: a step faster than this shows nothing
_TICK: Final = 0.2


class Progress:
    """One status line on a terminal; every method is a no-op when *stream* is not one."""

    def __init__(self, label: str, stream: TextIO | None = None, *, force: bool | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.label = label
        self.enabled = _isatty(self.stream) if force is None else force
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._shown = 0
        self._thread: threading.Thread | None = None

    def note(self, label: str) -> None:
        """Change what the line says."""
        self.label = label

    def start(self) -> None:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="kernelpolicy-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        with self._lock:
            if self._shown:
                self.stream.write("\r" + " " * self._shown + "\r")
                self.stream.flush()

    def line(self, frame: int) -> str:
        """The text shown at *frame* (pure, for tests)."""
        elapsed = time.monotonic() - self._start
        return f"kernelpolicy: {self.label} {_FRAMES[frame % len(_FRAMES)]} {elapsed:.1f} s"

    def _run(self) -> None:
        if self._stop.wait(_DELAY):
            return
        frame = 0
        while not self._stop.is_set():
            text = self.line(frame)
            with self._lock:
                pad = max(self._shown - len(text), 0)
                self.stream.write("\r" + text + " " * pad)
                self.stream.flush()
                self._shown = len(text)
            frame += 1
            self._stop.wait(_TICK)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress(label: str, stream: TextIO | None = None, *, force: bool | None = None) -> Iterator[Progress]:
    """Show *label* and the elapsed time while the block runs (terminals only)."""
    p = Progress(label, stream, force=force)
    p.start()
    try:
        yield p
    finally:
        p.stop()
