"""vLLM release data: per-release patch points (:mod:`.versions`), name tables (:mod:`.names`),
the wheel scan that writes ``releases.json`` and the files generated from it (:mod:`.generate`)."""

from __future__ import annotations

__all__: list[str] = []
