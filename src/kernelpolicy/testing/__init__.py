"""The 0.1 home of the engine harnesses, kept for one release: ``kernelpolicy.testing.vllm`` and
``kernelpolicy.testing.sglang`` import :mod:`kernelpolicy.engines.vllm.testing` and
:mod:`kernelpolicy.engines.sglang.testing` (:mod:`kernelpolicy._moved`). Importing this package
imports no engine."""

from __future__ import annotations

__all__: list[str] = []
