"""``kernelpolicy diff``: every domain cell whose decision changes between two rule sets.

Both policies are compiled (:mod:`.compile`) over one joint domain (the dimensions and value
classes that the conditions of either policy tell apart) in one decision-diagram manager, so
their outcome diagrams share nodes wherever the two policies agree. The change of a path is
one diagram of ``(old, new)`` pairs; the cells of each ``old -> new`` pair are counted exactly
and listed as the boxes the diagram makes of them.

Whatever kind of rule changed, what is compared is the decision each input gets: each policy's
outcome diagram (over completed states) is composed with its own implication fixpoint
(:meth:`~.compile.Compiled.closure`), which gives the decision of every cell read as an input,
implications applied as the resolver applies them. (A change to an implication alone shows.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Final

from ..policy import Backend, Policy
from .compile import Compiled, Outcome
from .coverage import PATHS
from .domain import Domain, build_domain
from .layered import Base, layer
from .mdd import DEFAULT_BUDGET, Manager

__all__ = ["Change", "DiffReport", "diff", "joint_domain"]

#: The most boxes one ``old -> new`` change lists (the rest are counted, not listed).
MAX_BOXES: Final = 10_000


@dataclass(frozen=True)
class Change:
    """Cells (one box of the change diagram) whose backend on *path* changes."""

    path: str
    old: str | None
    new: str | None
    label: str  #: the cells, as ``sm121 x qwen3_5_moe_text x fp8_block``
    cells: int
    fixed: tuple[tuple[str, str], ...] = ()  #: (dimension, class label) the cells agree on


@dataclass
class DiffReport:
    """Every change, and how much of the joint domain was compared."""

    changes: list[Change] = field(default_factory=list)
    cells: int = 0  #: cells of the joint domain (per path)
    dimensions: int = 0
    seconds: float = 0.0
    nodes: int = 0  #: decision-diagram nodes the two policies' paths hold together
    unlisted: int = 0  #: boxes of changed cells counted but not listed (past :data:`MAX_BOXES` a change)

    def grouped(self) -> dict[tuple[str, str | None, str | None], list[Change]]:
        """Changes per ``(path, old, new)``, largest first."""
        out: dict[tuple[str, str | None, str | None], list[Change]] = {}
        for c in self.changes:
            out.setdefault((c.path, c.old, c.new), []).append(c)
        for items in out.values():
            items.sort(key=lambda c: (-c.cells, c.label))
        return dict(sorted(out.items(), key=lambda kv: (PATHS.index(kv[0][0]), -sum(c.cells for c in kv[1]))))


def joint_domain(old: Policy, new: Policy) -> Domain:
    """The domain whose classes tell apart whatever either policy's conditions tell apart."""
    backends: dict[str, dict[str, Backend]] = {p: dict(e) for p, e in new.backends.items()}
    for path, entries in old.backends.items():
        mine = backends.setdefault(path, {})
        for bid, b in entries.items():
            if bid not in mine:
                mine[bid] = b
            elif mine[bid].requires != b.requires:  # keep both requirements in view
                mine[f"old:{bid}"] = b
    both = replace(
        new,
        backends=backends,
        orders={p: (*old.orders.get(p, ()), *new.orders.get(p, ())) for p in {*old.orders, *new.orders}},
        rules=(*old.rules, *new.rules),
        implications=(*old.implications, *new.implications),
    )
    return build_domain(both)


def diff(old: Policy, new: Policy, *, budget: int = DEFAULT_BUDGET, base: Base | None = None) -> DiffReport:
    """Every cell of the joint domain whose decision for some path differs.

    :param base: the proof of the files both sides stand on (:mod:`.layered`): each side is then
        decided again only where its own layer reaches.
    """
    start = time.perf_counter()
    domain = joint_domain(old, new)
    m = Manager([len(d.values) for d in domain.dims], [[v.weight for v in d.values] for d in domain.dims], budget)
    a = Compiled(_core(old), domain, manager=m)
    b = Compiled(_core(new), domain, manager=m)
    if base is not None:
        layer(base, a)
        layer(base, b)
    closures = (a.closure(old.implications), b.closure(new.implications))
    report = DiffReport(cells=domain.size, dimensions=len(domain.dims))
    sides = {
        path: (
            a.compose(a.outcome(path), closures[0]) if path in old.backends else m.term(_NONE),
            b.compose(b.outcome(path), closures[1]) if path in new.backends else m.term(_NONE),
        )
        for path in PATHS
        if path in old.backends or path in new.backends
    }
    # an input whose explicit choices contradict on any path is refused as a whole by the
    # resolver (on either side: nothing of it is compared)
    refused = m.false
    for outcomes in sides.values():
        for n in outcomes:
            refused = m.apply2("or", _or, refused, m.apply1("contradicts", _contradicts, n))
    roots = []
    for path, (before, after) in sides.items():
        change = m.ite(refused, m.term((_SKIP, _SKIP)), m.apply2("diff", _backends, before, after))
        roots += [before, after]
        for was, now in a.count(change, path):
            if was != now and was is not _SKIP and now is not _SKIP:
                report.changes += _listed(a, change, path, (was, now), report)
    report.nodes = len({n for r in roots for n in m.reachable(r)})
    report.seconds = time.perf_counter() - start
    return report


class _Skip:
    def __repr__(self) -> str:
        return "<skip>"


_SKIP: Final = _Skip()  #: a cell no decision is compared in (no MoE path; explicit choices contradict)
_NONE: Final = Outcome("none")


def _decided(o: Any) -> Any:
    if not isinstance(o, Outcome) or not o.decided:
        return _SKIP
    return o.backend


def _contradicts(o: Any) -> bool:
    return isinstance(o, Outcome) and o.kind == "contradiction"


def _or(a: Any, b: Any) -> bool:
    return bool(a) or bool(b)


def _backends(a: Any, b: Any) -> tuple[Any, Any]:
    return (_decided(a), _decided(b))


def _core(policy: Policy) -> Policy:
    return replace(policy, implications=(), digest=policy.digest + "+closed")


def _listed(c: Compiled, change: int, path: str, pair: tuple[Any, Any], report: DiffReport) -> list[Change]:
    """The boxes of cells of *change* whose ``(old, new)`` is *pair*, one :class:`Change` each
    (boxes alike but for the model kind, merged)."""
    merged: dict[tuple[tuple[str, str], ...], int] = {}
    boxes = c.labelled(change, lambda v: v == pair, path, MAX_BOXES)
    if len(boxes) == MAX_BOXES:
        whole = c.m.ite(c.m.eq(change, pair), c.m.true, c.m.false)
        report.unlisted += c.m.count_cubes(c.by_kind(whole, path), lambda v: v is True) - MAX_BOXES
    for pairs, cells, _ in boxes:
        merged[pairs] = merged.get(pairs, 0) + cells
    old, new = pair
    return [Change(path, old, new, _label(pairs), cells, pairs) for pairs, cells in merged.items()]


def _label(pairs: tuple[tuple[str, str], ...]) -> str:
    return " x ".join(v if n in _BARE else f"{n}={v}" for n, v in pairs) or "every cell"


_BARE: Final = frozenset({"gpu.sm", "model.type", "quant.scheme"})
