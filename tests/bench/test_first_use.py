"""FlashInfer's first-use compile prints progress (issue #36: ~100 s with nothing printed)."""

from __future__ import annotations

import io

from kernelpolicy.bench import Prepared
from kernelpolicy.bench._first_use import announce_first_use


def test_the_first_call_says_it_may_compile_and_how_long_it_took() -> None:
    ticks = iter([0.0, 104.0])
    calls: list[int] = []
    out = io.StringIO()
    seen: set[str] = set()
    prepared = Prepared(run=lambda: calls.append(1), poison=lambda: None, error=lambda: 0.0, tolerance=1.0)
    first = announce_first_use("FlashInfer", prepared, out=out, clock=lambda: next(ticks), seen=seen)
    first.run()
    first.run()
    later = announce_first_use("FlashInfer", prepared, out=out, seen=seen)
    later.run()
    assert calls == [1, 1, 1]
    text = out.getvalue()
    assert text.count("first FlashInfer call: it compiles its kernels now") == 1
    assert "kernelpolicy: bench: FlashInfer ready after 104 s" in text
    assert later is prepared  # announced once per process
