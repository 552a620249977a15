"""Renderings of a decision at the edge: the explain text (:mod:`.explain`), the engine flags
that reproduce it (:mod:`.flags`) and the one-line start-up summary (:mod:`.summary`)."""

from __future__ import annotations

__all__: list[str] = []
