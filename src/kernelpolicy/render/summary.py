"""The one-line start-up summary of a decision, as every engine's plugin logs it."""

from __future__ import annotations

from typing import Any

from ..facts.keys import DECIDED_PATHS

__all__ = ["startup_summary"]


def startup_summary(decision: Any) -> str:
    """``dense=... moe=... router=... warmup=...``: each path the model has, its backend (``NONE``
    without one) and the rule that decided it, then the kernels warmed."""
    parts = []
    for name in DECIDED_PATHS:
        path = decision.paths.get(name)
        if path is None:
            continue
        backend = getattr(path, "backend", None)
        rule = getattr(path, "rule", None)
        if backend is None and getattr(path, "reason", None) and not getattr(path, "candidates", ()):
            continue  # the model has no such path
        parts.append(f"{name}={backend or 'NONE'}" + (f" [{rule}]" if rule else ""))
    parts.append("warmup=" + (",".join(decision.warmup) or "none"))
    return " ".join(parts)
