"""Tools around the rules: the formatter (:mod:`.fmt`), JSON Schemas (:mod:`.schemas`), shell
completion (:mod:`.completion`) and the support matrix (:mod:`.matrix`)."""

from __future__ import annotations

__all__: list[str] = []
