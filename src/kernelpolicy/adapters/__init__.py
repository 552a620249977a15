"""Adapters apply a kernelpolicy Decision inside an inference engine (``vllm``: the vLLM plugin)."""

from __future__ import annotations

__all__: list[str] = []
