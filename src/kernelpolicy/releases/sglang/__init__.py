"""SGLang release data: per-release flags and selection points (:mod:`.versions`), name tables
(:mod:`.names`) and the wheel scan that writes ``releases.json``."""

from __future__ import annotations

__all__: list[str] = []
