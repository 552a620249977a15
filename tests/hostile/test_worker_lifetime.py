"""Hostile input, round three: `check` workers end with their parent (one was found alive 12
minutes after its parent was killed, adopted by init)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from .helpers import SRC

_PARENT = """
import multiprocessing, os, sys, time
from kernelpolicy._lifetime import die_with_parent

def work(_):
    time.sleep(600)

ctx = multiprocessing.get_context("fork")
pool = ctx.Pool(2, initializer=die_with_parent, initargs=(os.getpid(),))
pool.map_async(work, [0, 1])
time.sleep(1.0)
print(" ".join(str(p.pid) for p in pool._pool), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pool_workers_end_when_their_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert parent.stdout is not None
    workers = [int(p) for p in parent.stdout.readline().split()]
    assert len(workers) == 2 and all(_alive(p) for p in workers)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):  # a bound on the wait, not a speed target: they end at once on Linux
        if not any(_alive(p) for p in workers):
            break
        time.sleep(0.1)
    left = [p for p in workers if _alive(p)]
    for p in left:  # (clean up what the test itself started, before failing)
        os.kill(p, signal.SIGKILL)
    assert not left


def test_checks_pool_uses_the_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    import kernelpolicy as kp
    from kernelpolicy._lifetime import die_with_parent
    from kernelpolicy.analysis import coverage

    seen: dict[str, Any] = {}

    class _Stop(Exception):
        pass

    class _Ctx:
        def Pool(self, *args: Any, **kwargs: Any) -> Any:
            seen.update(kwargs)
            raise _Stop

    monkeypatch.setattr(multiprocessing, "get_context", lambda method: _Ctx())
    with pytest.raises(_Stop):
        coverage.verify(kp.load_policy(environ=False), jobs=2)
    assert seen["initializer"] is die_with_parent and seen["initargs"] == (os.getpid(),)
