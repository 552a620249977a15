"""Facts: what is known about the machine, the software, the model and the deployment.

:class:`Facts` is the immutable record the resolver reads; :func:`facts_for` builds one from
a GPU spec, a model (catalog id, folder or config.json) and explicit overrides. Every key is
documented in :data:`FACT_KEYS`.
"""

from __future__ import annotations

from .build import facts_for, model_facts
from .keys import BACKENDS, FACT_KEYS, PATHS, FactKey, Kind, lookup_key
from .record import SOURCES, Facts, normalise_value, parse_fact_text

__all__ = [
    "BACKENDS",
    "FACT_KEYS",
    "PATHS",
    "SOURCES",
    "FactKey",
    "Facts",
    "Kind",
    "facts_for",
    "lookup_key",
    "model_facts",
    "normalise_value",
    "parse_fact_text",
]


def __dir__() -> list[str]:
    return __all__
