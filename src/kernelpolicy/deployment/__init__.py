"""The deployment: the one place a :class:`~kernelpolicy.facts.Facts` record is assembled.

Every caller (``explain``, the audits, the matrix, fleet, both engine plugins) turns what it
knows about one deployment into facts here: :mod:`.build` (a GPU spec and a model),
:mod:`.pipeline` (the process environment, explicit choices, defaults) and :mod:`.serve` (an
engine's own command line).
"""

from __future__ import annotations

from .build import facts_for, model_facts
from .pipeline import BuiltFacts, build_facts

__all__ = ["BuiltFacts", "build_facts", "facts_for", "model_facts"]
