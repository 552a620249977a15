"""Adapters apply a kernelpolicy Decision inside an inference engine: ``vllm`` and ``sglang`` (each
engine's plugin), with what both share: ``agreement`` (every rank of a deployment decides alike)
and ``summary`` (the one-line start-up summary)."""

from __future__ import annotations

__all__: list[str] = []
