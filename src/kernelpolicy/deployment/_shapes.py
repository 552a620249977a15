"""Layer-shape facts derived from the model's widths and the deployment's parallelism (pure).

Kernels have alignment limits on the GEMM shapes each rank runs, and those shapes follow from
config.json and the tensor/expert-parallel split. The derived facts are finite-domain where a
rule tests them (``deploy.moe_intermediate_align``), so the exhaustive check walks a handful of
classes, not every integer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..facts.keys import SHAPE_ALIGNS

__all__ = ["align_class", "moe_intermediate_per_rank", "shape_facts"]

_POWERS: Final = tuple(int(a) for a in SHAPE_ALIGNS if a.isdigit())


def align_class(n: int) -> str:
    """The largest of 128, 64, 32, 16 that divides *n*, as a ``deploy.moe_intermediate_align`` value."""
    return next((str(p) for p in _POWERS if n > 0 and n % p == 0), "other")


def moe_intermediate_per_rank(intermediate: int, tp: int, ep: int) -> int | None:
    """Each rank's slice of an expert's FFN width, or ``None`` when the split is uneven.

    The experts are split tensor-parallel over ``tp // ep`` ranks (at least 1): vLLM's expert
    parallelism spans the tensor-parallel ranks and keeps each expert whole, SGLang's `--ep-size`
    divides its `--tp-size`, leaving ``tp // ep`` ranks per expert.
    """
    if intermediate <= 0 or tp <= 0 or ep <= 0:
        return None
    moe_tp = max(1, tp // ep)
    return intermediate // moe_tp if intermediate % moe_tp == 0 else None


def shape_facts(values: Mapping[str, Any]) -> dict[str, object]:
    """The shape facts *values* settle and do not already state (empty for a dense model)."""
    if values.get("model.is_moe") is not True:
        return {}
    width, tp, ep = (values.get(k) for k in ("model.intermediate_size", "deploy.tp", "deploy.ep"))
    out: dict[str, object] = {}
    per_rank = values.get("deploy.moe_intermediate_per_rank")
    if per_rank is None and isinstance(width, int) and isinstance(tp, int) and isinstance(ep, int):
        per_rank = moe_intermediate_per_rank(width, tp, ep)
        if per_rank is not None:
            out["deploy.moe_intermediate_per_rank"] = per_rank
    if isinstance(per_rank, int) and "deploy.moe_intermediate_align" not in values:
        out["deploy.moe_intermediate_align"] = align_class(per_rank)
    return out
