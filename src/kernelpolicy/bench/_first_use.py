"""Progress through a library's first-use compile: FlashInfer builds its kernels the first time a
process on a machine calls them (about 100 s for the sm90 block-FP8 GEMM), with nothing printed."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Final, TextIO

from .protocol import Prepared

__all__ = ["SLOW_SECONDS", "announce_first_use"]

#: A first call longer than this is reported as the compile it was.
SLOW_SECONDS: Final = 5.0

_seen: set[str] = set()


def announce_first_use(
    library: str,
    prepared: Prepared,
    *,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    seen: set[str] | None = None,
) -> Prepared:
    """*prepared* whose first call in this process (per *library*) says, before it starts, that the
    library may compile its kernels now, and after it, how long that took when it was slow."""
    done = _seen if seen is None else seen
    if library in done:
        return prepared
    inner = prepared.run

    def run() -> object:
        if library in done:
            return inner()
        done.add(library)
        stream = out or sys.stderr
        print(
            f"kernelpolicy: bench: first {library} call: it compiles its kernels now if this machine has"
            " not (FlashInfer's sm90 GEMM: about 100 s; cached after)",
            file=stream,
            flush=True,
        )
        t0 = clock()
        result = inner()
        took = clock() - t0
        if took > SLOW_SECONDS:
            print(f"kernelpolicy: bench: {library} ready after {took:.0f} s", file=stream, flush=True)
        return result

    return replace(prepared, run=run)
