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
from .compile import Compiled, Outcome, is_contradiction
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


_Key = tuple[str, str | None, str | None]


@dataclass
class DiffReport:
    """Every change (its cells counted exactly), the largest groups of each listed, and how
    much of the joint domain was compared."""

    changes: list[Change] = field(default_factory=list)  #: the groups listed, the largest of each change
    #: per ``(path, old, new)``: the cells that change so (exact) and the groups they make
    totals: dict[_Key, tuple[int, int]] = field(default_factory=dict)
    cells: int = 0  #: cells of the joint domain (per path)
    dimensions: int = 0
    seconds: float = 0.0
    nodes: int = 0  #: decision-diagram nodes the two policies' paths hold together

    @property
    def changed(self) -> int:
        """Path decisions that change, over every cell (exact, listed or not)."""
        return sum(cells for cells, _ in self.totals.values())

    @property
    def unlisted(self) -> int:
        """Groups of changed cells counted but not listed."""
        return sum(groups for _, groups in self.totals.values()) - sum(len(v) for v in self.grouped().values())

    def grouped(self) -> dict[_Key, list[Change]]:
        """The listed groups per ``(path, old, new)``, largest first; the changes in path order,
        the largest first."""
        out: dict[_Key, list[Change]] = {key: [] for key in self.totals}
        for c in self.changes:
            out.setdefault((c.path, c.old, c.new), []).append(c)
        for items in out.values():
            items.sort(key=lambda c: (-c.cells, c.label))
        return dict(sorted(out.items(), key=lambda kv: (PATHS.index(kv[0][0]), -self.totals.get(kv[0], (0, 0))[0])))

    def lines(self, show: int | None) -> list[str]:
        """The report as ``diff`` prints it: each change with its cells and groups, its
        *show* largest groups (``None``: every one listed), and what was compared."""
        from .checking import cells_said  # noqa: PLC0415

        out = []
        for (path, o, n), items in self.grouped().items():
            cells, groups = self.totals[(path, o, n)]
            was, now = o or "none", n or "none"
            out.append(f"{path}: {was} -> {now} in {cells_said(cells)} ({cells_said(groups, 'group')})")
            shown = items if show is None else items[:show]
            out += [f"  {c.label}: {path} {was} -> {now} ({cells_said(c.cells)})" for c in shown]
            if groups > len(shown):
                more = "--all lists them"
                if show is None:
                    more = f"the largest {MAX_BOXES:,} of each model kind are listed"
                out.append(f"  ... and {groups - len(shown):,} more groups ({more})")
        out.append(
            f"compared {cells_said(self.cells, 'domain cell')} over {self.dimensions} dimensions in "
            f"{self.seconds:.2f} s ({self.nodes:,} decision-diagram nodes): "
            f"{cells_said(self.changed, 'path decision')} change"
        )
        return out


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


def diff(
    old: Policy, new: Policy, *, budget: int = DEFAULT_BUDGET, base: Base | None = None, listed: int = MAX_BOXES
) -> DiffReport:
    """Every cell of the joint domain whose decision for some path differs.

    :param base: the proof of the files both sides stand on (:mod:`.layered`): each side is then
        decided again only where its own layer reaches.
    :param listed: the groups listed per change and model kind, the largest first (every
        change's cells and groups are counted whatever it is).
    """
    start = time.perf_counter()
    domain = joint_domain(old, new)
    m = Manager([len(d.values) for d in domain.dims], [[v.weight for v in d.values] for d in domain.dims], budget)
    a = Compiled(_core(old), domain, manager=m)
    b = Compiled(_core(new), domain, manager=m)
    if base is not None:
        layer(base, a)
        layer(base, b)
    # Each side's decision of an input is its outcome read at the input's fixpoint (the closure).
    # Where both sides' implications agree, the closure is one substitution of the cells, and
    # it commutes with comparing the two outcomes cell by cell: the comparison (cells whose
    # decision stays the same made one terminal) is read through it once, not each side whole.
    one = new.implications == old.implications
    closure = a.closure(old.implications)
    mine = (None, None) if one else (closure, b.closure(new.implications))  # each side read at its own fixpoint
    report = DiffReport(cells=domain.size, dimensions=len(domain.dims))
    sides = {
        path: (
            _read(a, a.outcome(path), mine[0]) if path in old.backends else m.term(_NONE),
            _read(b, b.outcome(path), mine[1]) if path in new.backends else m.term(_NONE),
        )
        for path in PATHS
        if path in old.backends or path in new.backends
    }
    # an input whose explicit choices contradict on any path is refused as a whole by the
    # resolver (on either side: nothing of it is compared)
    refused = m.any_of([m.where(n, is_contradiction, "contradiction") for pair in sides.values() for n in pair])
    roots = []
    for path, (before, after) in sides.items():
        change = m.ite(refused, m.term(_SAME), m.apply2("diff", _backends, before, after))
        if one:
            change = a.compose(change, closure)
        roots += [before, after]
        for pair, cells in a.count(change, path).items():
            if pair is not _SAME:
                changes, groups = _listed(a, change, path, pair, listed)
                report.changes += changes
                report.totals[(path, *pair)] = (cells, groups)
    report.nodes = len({n for r in roots for n in m.reachable(r)})
    report.seconds = time.perf_counter() - start
    return report


class _Skip:
    def __repr__(self) -> str:
        return "<skip>"


_SKIP: Final = _Skip()  #: a cell no decision is compared in (no MoE path; explicit choices contradict)
_SAME: Final = "<same>"  #: a cell whose decision does not change (or is not compared)
_NONE: Final = Outcome("none")


def _decided(o: Any) -> Any:
    if not isinstance(o, Outcome) or not o.decided:
        return _SKIP
    return o.backend


def _backends(a: Any, b: Any) -> Any:
    """A cell's ``(old, new)`` backends where its decision changes; else :data:`_SAME`."""
    was, now = _decided(a), _decided(b)
    return _SAME if was == now or was is _SKIP or now is _SKIP else (was, now)


def _read(c: Compiled, outcome: int, closure: dict[int, int] | None) -> int:
    return outcome if closure is None else c.compose(outcome, closure)


def _core(policy: Policy) -> Policy:
    return replace(policy, implications=(), digest=policy.digest + "+closed")


def _listed(c: Compiled, change: int, path: str, pair: tuple[Any, Any], limit: int) -> tuple[list[Change], int]:
    """The largest *limit* boxes of each model kind of the cells of *change* whose ``(old, new)``
    is *pair*, one :class:`Change` each (boxes alike but for the model kind, merged), and the
    groups those cells make: the changes listed where every box is, else the boxes counted."""
    whole = c.m.eq(change, pair)
    merged: dict[tuple[tuple[str, str], ...], int] = {}
    boxes = c.labelled(whole, bool, path, limit, largest=True)
    for pairs, cells, _ in boxes:
        merged[pairs] = merged.get(pairs, 0) + cells
    old, new = pair
    listed = [Change(path, old, new, _label(pairs), cells, pairs) for pairs, cells in merged.items()]
    counted = c.count_boxes(whole, bool, path)
    return listed, len(listed) if counted == len(boxes) else counted


def _label(pairs: tuple[tuple[str, str], ...]) -> str:
    return " x ".join(v if n in _BARE else f"{n}={v}" for n, v in pairs) or "every cell"


_BARE: Final = frozenset({"gpu.sm", "model.type", "quant.scheme"})
