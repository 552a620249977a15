"""Test helpers that are part of the product: run a real engine's own selection code on a
simulated GPU (``kernelpolicy.testing.vllm``). Importing this package imports no engine."""

from __future__ import annotations

__all__: list[str] = []
