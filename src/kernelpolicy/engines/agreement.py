"""Multi-rank agreement: every rank of a distributed vLLM must reach the same decision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AgreementError", "agreement_report", "check_agreement", "fact_differences"]


class AgreementError(RuntimeError):
    """Ranks of one deployment decided differently (a mixed fleet, or different env per rank)."""

    def __init__(self, report: str, per_rank: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(report)
        self.per_rank = tuple(per_rank)


def agreement_report(per_rank: Sequence[Mapping[str, Any]]) -> str | None:
    """``None`` when every rank has the same fingerprint, else a readable report.

    Each item is ``{"rank", "fingerprint", "summary", "facts"}`` as one rank gathered it.
    """
    groups: dict[str, list[int]] = {}
    for item in per_rank:
        groups.setdefault(str(item.get("fingerprint")), []).append(int(item.get("rank", -1)))
    if len(groups) <= 1:
        return None
    lines = [f"kernelpolicy: ranks disagree on the kernel decision ({len(groups)} different):"]
    by_rank = {int(item.get("rank", -1)): item for item in per_rank}
    for fingerprint, ranks in groups.items():
        first = by_rank[ranks[0]]
        lines.append(f"  ranks {ranks}: {first.get('summary')} [{fingerprint[:19]}]")
    by_label = {f"rank {int(i.get('rank', -1))}": dict(i.get("facts") or {}) for i in per_rank}
    lines += ["  " + line for line in fact_differences(by_label, between="ranks")]
    return "\n".join(lines)


def fact_differences(facts_by: Mapping[str, Mapping[str, Any]], *, between: str) -> list[str]:
    """One line per fact whose value differs between the members of *facts_by*.

    *facts_by* maps a member's label (``rank 0``, ``group A``) to its facts; a member without
    the key counts as ``None``. When every fact agrees, one line says the policy files differ
    between *between* (``ranks``, ``groups``): the only other input of a fingerprint.
    """
    keys = sorted({key for facts in facts_by.values() for key in facts})
    lines = []
    for key in keys:
        values = {label: facts.get(key) for label, facts in facts_by.items()}
        if len({repr(v) for v in values.values()}) > 1:
            lines.append(f"fact {key}: " + ", ".join(f"{label}={v!r}" for label, v in values.items()))
    return lines or [f"(the facts agree; the policy files differ between {between})"]


def check_agreement(entry: Mapping[str, Any], group: Any = None) -> list[dict[str, Any]] | None:
    """All-gather *entry* over ``torch.distributed`` and raise :class:`AgreementError` on mismatch.

    Does nothing (returns ``None``) when torch.distributed is absent, not initialised, or has
    one rank. Returns the gathered entries otherwise.
    """
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    world = int(dist.get_world_size(group))
    if world <= 1:
        return None
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, dict(entry), group=group)
    items = [dict(g) for g in gathered if isinstance(g, Mapping)]
    report = agreement_report(items)
    if report is not None:
        raise AgreementError(report, items)
    return items
