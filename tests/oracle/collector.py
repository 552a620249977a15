"""Python's cycle collector paused while the proof runs.

The exhaustive walk and what reads its groups (findings, certificates, the diff) allocate
millions of short-lived objects beside a large live heap: the memos and hundreds of thousands
of groups. Each pass of the cycle collector's older generations goes over every live object
again, and over a walk those passes found nothing to free: they were half its time (the MoE
walk of sm90: 11.5 s with them, 6.2 s without; the parent reading 575,000 groups back from its
workers: 35 s with them, 4 s without).

Pausing it is sound only while that code makes no reference cycles, so that every object it
drops is freed by its reference count: ``tests/test_check.py`` walks with the collector keeping
whatever it finds, and requires it to find nothing. A cycle made anyway is not lost, only freed
later, by the first collection once the pause ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off inside (and in the processes forked inside), as it was after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
