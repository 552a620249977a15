"""Engine release data: what each vLLM and SGLang release does, scanned from its wheel
(``releases.json``), the tables and rule files generated from it, and the name tables from
engine names to kernelpolicy ids. Data and pure functions only: nothing here imports an engine."""

from __future__ import annotations

__all__: list[str] = []
