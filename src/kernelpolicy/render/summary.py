"""The one-line start-up summary of a decision, as every engine's plugin logs it."""

from __future__ import annotations

from typing import Any

from ..facts.keys import DECIDED_PATHS

__all__ = ["startup_summary"]


def startup_summary(decision: Any) -> str:
    """``dense=... moe=... router=... warmup=...``: each path the model has, its backend (``NONE``
    without one), the rule that decided it and the ``prefer`` rules that reordered it
    (``moe=triton [prefer deep_gemm-moe-tp8-triton-first]``), then the kernels warmed."""
    parts = []
    for name in DECIDED_PATHS:
        path = decision.paths.get(name)
        if path is None:
            continue
        backend = getattr(path, "backend", None)
        rule = getattr(path, "rule", None)
        if backend is None and getattr(path, "reason", None) and not getattr(path, "candidates", ()):
            continue  # the model has no such path
        why = [rule] if rule else []
        explicit = getattr(path, "explicit", None)
        if not (explicit and rule == explicit):  # an explicit choice that won decided alone
            why += [f"prefer {r}" for r in getattr(path, "preferred_by", ())]
        parts.append(f"{name}={backend or 'NONE'}" + (f" [{', '.join(why)}]" if why else ""))
    parts.append("warmup=" + (",".join(decision.warmup) or "none"))
    return " ".join(parts)
