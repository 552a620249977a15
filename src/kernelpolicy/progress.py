"""Progress on stderr for steps that take seconds (``check``, ``diff``, ``vllm audit``, building
a vLLM environment), only when stderr is a terminal: pipes, files and CI logs get nothing.

``with progress("checking"):`` shows ``kernelpolicy: checking ... 3.2 s`` on one line, updated a
few times a second from a daemon thread, and erases it when the step ends, so the step's own
output is not interleaved with it. :meth:`Progress.note` changes the text (``building vllm 0.26.0:
installing``); :meth:`Progress.fraction` says how much of the step is done, and the line then
shows it with an estimate of the time left (``12/27, about 40 s left``).
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
        self._done = 0
        self._total = 0
        self._at = self._start  #: when the last part finished

    def fraction(self, done: int, total: int) -> None:
        """*done* of *total* parts of the step are finished (thread-safe, cheap)."""
        self._done, self._total, self._at = done, total, time.monotonic()

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
        now = time.monotonic()
        elapsed = now - self._start
        text = f"kernelpolicy: {self.label} {_FRAMES[frame % len(_FRAMES)]} {elapsed:.1f} s"
        done, total = self._done, self._total
        if total:
            text += f", {done}/{total} parts"
            if 0 < done < total:
                # the parts done so far took this long each; the estimate counts from the last one
                left = (self._at - self._start) / done * (total - done) - (now - self._at)
                text += f", about {max(left, 0.0):.0f} s left" if left > 0 else ", finishing"
        return text

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
