"""Facts: what is known about the machine, the software, the model and the deployment.

:class:`Facts` is the immutable record the resolver reads; :func:`kernelpolicy.deployment.facts_for` builds one from
a GPU spec, a model (catalog id, folder or config.json) and explicit overrides. Every key is
documented in :data:`FACT_KEYS`.
"""

from __future__ import annotations

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
    "lookup_key",
    "normalise_value",
    "parse_fact_text",
]


def __dir__() -> list[str]:
    return __all__


def __getattr__(name: str) -> object:
    """``facts_for`` and ``model_facts`` moved to :mod:`kernelpolicy.deployment` (the one fact
    assembly); this shim keeps ``kernelpolicy.facts.facts_for`` working for one release."""
    if name in ("facts_for", "model_facts"):
        from .. import deployment

        return getattr(deployment, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
