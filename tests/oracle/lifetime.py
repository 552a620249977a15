"""Worker processes that end with the process that started them.

A ``check`` killed while it runs (Ctrl-C in a CI step, a timeout, the OOM killer) must not leave
its pool workers walking the domain for minutes, adopted by init. :func:`die_with_parent` is
the pool's initializer: on Linux the kernel sends the worker ``SIGKILL`` when its parent dies
(``prctl(PR_SET_PDEATHSIG)``); everywhere, a small thread notices that the parent is gone
(the worker was adopted: its parent id changed) and ends the worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from typing import Final

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG: Final = 1
_POLL_S: Final = 0.5


def _watch(parent: int) -> None:
    while True:
        time.sleep(_POLL_S)
        if os.getppid() != parent:
            os._exit(1)


def die_with_parent(parent: int) -> None:
    """Make this (worker) process end when the process *parent* ends (see the module docstring)."""
    if sys.platform.startswith("linux"):
        # no prctl here: the watching thread below still ends the worker
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)  # the parent ended before the hook was in place
    threading.Thread(target=_watch, args=(parent,), name="kernelpolicy-die-with-parent", daemon=True).start()
