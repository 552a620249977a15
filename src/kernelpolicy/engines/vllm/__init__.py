"""vLLM: the plugin (:mod:`.plugin`), the facts it reads from vLLM's config, the audit harness
(:mod:`.testing`) and the conformance sweep (:mod:`.conformance`). Importing this package
imports no vLLM and nothing of the plugin."""

from __future__ import annotations

__all__: list[str] = []
