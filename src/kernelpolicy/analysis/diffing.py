"""``kernelpolicy diff``: every domain cell whose decision changes between two rule sets.

Both policies are walked over one joint domain (the dimensions and value classes that the
conditions of either policy tell apart), with the exhaustive walk of :mod:`.coverage`. Each
walk yields groups of cells that share one decision; where a group of the old walk and a
group of the new walk overlap (they agree on every dimension both fix), the overlap is a set
of cells that the old policy decides one way and the new one decides another way, or the
same way. Changes are counted per path and ``old -> new`` pair, and listed per overlap.

Only the cells where the two can differ are walked: where the policies share their catalog and
differ in some rules, implications and ``unsupported`` entries (:func:`~.scope.delta`), a cell
where none of those takes effect decides alike under both, and both walks leave it out
(``scope=``), so the work follows what changed, not the product of two whole walks.

Whatever kind of rule changed, what is compared is the decision each input gets. Where both
policies hold the same implications, every input reaches the same completed state under both,
so comparing the decisions of the completed states (the walk ``check`` does) compares the
decisions of all inputs. Where the implications differ, one input may reach different states,
so the walk covers the inputs as given and lets the resolver apply each policy's
implications (slower: the dimensions implications read are split on too).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .._collector import collector_paused
from ..policy import Backend, Policy
from .coverage import PATHS, PathGroup, verify
from .domain import Domain, ValueClass, build_domain, meet
from .scope import delta

__all__ = ["Change", "DiffReport", "diff"]


@dataclass(frozen=True)
class Change:
    """Cells (one overlap of an old and a new group) whose backend on *path* changes."""

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
    groups: int = 0  #: groups of cells the two walks resolved, together
    skipped: int = 0  #: groups of cells left out: no rule that differs takes effect there

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


@collector_paused()
def diff(old: Policy, new: Policy, *, jobs: int | None = None, scoped: bool = True) -> DiffReport:
    """Every cell of the joint domain whose decision for some path differs.

    :param scoped: walk only the cells where the two can differ (``False``: every cell of
        both, for tests that compare the two).
    """
    start = time.perf_counter()
    domain = joint_domain(old, new)
    closed = _implications(old) == _implications(new)
    scope = delta(old, new) if closed and scoped else None
    a = verify(old, domain, jobs=jobs, closed=closed, scope=scope)
    b = verify(new, domain, jobs=jobs, closed=closed, scope=scope)
    report = DiffReport(cells=domain.size, dimensions=len(domain.dims))
    report.groups = sum(a.groups.values()) + sum(b.groups.values())
    report.skipped = a.skipped + b.skipped
    sizes = {d.name: d.size for d in domain.dims}
    moe_only = {d.name for d in domain.dims if d.moe_only}
    order = [d.name for d in domain.dims]
    news = _by_task(b.results)
    for key, olds in _by_task(a.results).items():
        for og, ng, fixed in _overlaps(olds, news.get(key, [])):
            moe = bool(fixed["model.is_moe"].facts.get("model.is_moe"))
            cells = 1
            for name in order:
                if name == "model.is_moe" or (name in moe_only and not moe):
                    continue
                cells *= fixed[name].weight if name in fixed else sizes[name]
            pairs = tuple((n, fixed[n].label) for n in order if n in fixed and n != "model.is_moe")
            report.changes.append(Change(og.path, og.backend, ng.backend, _label(pairs), cells, pairs))
    full = {d.name: [v.label for v in d.values] for d in domain.dims}
    report.changes = _merge(report.changes, full)
    report.seconds = time.perf_counter() - start
    return report


def _implications(policy: Policy) -> frozenset[tuple[Any, ...]]:
    """What a policy's implications say (wherever they are written)."""
    return frozenset(
        (imp.when, imp.unless, tuple(sorted((k, repr(v)) for k, v in imp.sets.items()))) for imp in policy.implications
    )


_TaskKey = tuple[str, str, str]


def _by_task(results: list[PathGroup]) -> dict[_TaskKey, list[PathGroup]]:
    out: dict[_TaskKey, list[PathGroup]] = {}
    for pg in results:
        key = (pg.path, pg.group.fixed["gpu.sm"].label, pg.group.fixed["model.is_moe"].label)
        out.setdefault(key, []).append(pg)
    return out


def _overlaps(
    olds: list[PathGroup], news: list[PathGroup]
) -> Iterator[tuple[PathGroup, PathGroup, dict[str, ValueClass]]]:
    """Every old and new group that share cells and choose different backends, with the cells
    they share, in the order of the old groups, then the new.

    Two groups share cells when, on every dimension both fix, their classes share a class of
    the full domain. Comparing every pair is quadratic (two walks of 10,000 groups: 10^8
    comparisons), so the new groups are indexed instead: for each dimension and class of the
    full domain, the set of new groups that hold it (leaving the dimension open holds every
    class), as a bit set. An old group's partners are then the intersection, over the
    dimensions it fixes, of the sets of the classes it holds, less the groups that choose its
    backend: a few machine words per dimension, and only real overlaps are visited."""
    everyone = (1 << len(news)) - 1
    holding: dict[str, dict[str, list[int]]] = {}
    choosing: dict[str | None, list[int]] = {}
    for j, ng in enumerate(news):
        choosing.setdefault(ng.backend, []).append(j)
        for name, v in ng.group.fixed.items():
            at = holding.setdefault(name, {})
            for m in v.members:
                at.setdefault(m.label, []).append(j)
    fixing = {name: _bits(j for js in at.values() for j in js) for name, at in holding.items()}
    sets = {name: {label: _bits(js) for label, js in at.items()} for name, at in holding.items()}
    others = {b: everyone & ~_bits(js) for b, js in choosing.items()}
    memo: dict[tuple[str, tuple[str, ...]], int] = {}
    for og in olds:
        mask = others.get(og.backend, everyone)
        for name, v in og.group.fixed.items():
            if not mask:
                break
            if name not in sets:
                continue  # no new group fixes it: every one holds the class
            labels = tuple(m.label for m in v.members)
            part = memo.get((name, labels))
            if part is None:
                part = everyone & ~fixing[name]
                for label in labels:
                    part |= sets[name].get(label, 0)
                memo[(name, labels)] = part
            mask &= part
        while mask:
            low = mask & -mask
            ng = news[low.bit_length() - 1]
            mask ^= low
            fixed = _meet(og.group.fixed, ng.group.fixed)
            assert fixed is not None, "the index and the meet of two groups disagree"
            yield og, ng, fixed


def _bits(indexes: Iterable[int]) -> int:
    """A bit set of *indexes*, as an integer (bit *j* set for each *j*)."""
    buf = bytearray()
    for j in indexes:
        byte = j >> 3
        if byte >= len(buf):
            buf.extend(bytes(byte + 1 - len(buf)))
        buf[byte] |= 1 << (j & 7)
    return int.from_bytes(buf, "little")


def _meet(a: Mapping[str, ValueClass], b: Mapping[str, ValueClass]) -> dict[str, ValueClass] | None:
    """The cells two groups share (``None``: none). The two walks split a dimension into
    different parts, so a shared dimension keeps the classes both parts hold."""
    out = dict(a)
    for name, v in b.items():
        if name in out:
            both = meet(out[name], v)
            if both is None:
                return None
            out[name] = both
        else:
            out[name] = v
    return out


_BARE = frozenset({"gpu.sm", "model.type", "quant.scheme"})


def _label(pairs: tuple[tuple[str, str], ...]) -> str:
    return " x ".join(v if n in _BARE else f"{n}={v}" for n, v in pairs) or "every cell"


def _merge(changes: list[Change], full: Mapping[str, list[str]]) -> list[Change]:
    """Coalesce changes that differ in one dimension only (the overlap of two walks fixes
    more dimensions than the change depends on): a dimension all of whose classes appear is
    dropped, some classes are named together (``true|unknown``).

    Each pass buckets the changes by everything but one dimension (a dictionary, so a pass
    is linear in the changes); passes repeat over the dimensions until none coalesces."""
    todo = list(changes)
    merged = True
    while merged:
        merged = False
        for name, ordered in full.items():
            todo, joined = _merge_on(todo, name, ordered)
            merged = merged or joined
    return todo


def _merge_on(todo: list[Change], name: str, ordered: list[str]) -> tuple[list[Change], bool]:
    """One pass of :func:`_merge` over dimension *name*: the changes, with those that differ
    only in their class of *name* coalesced (each once), and whether any were."""
    classes = set(ordered)
    buckets: dict[tuple[str, str | None, str | None, tuple[tuple[str, str], ...]], list[Change]] = {}
    for c in todo:
        if any(n == name for n, _ in c.fixed):
            rest = tuple((n, v) for n, v in c.fixed if n != name)
            buckets.setdefault((c.path, c.old, c.new, rest), []).append(c)
    replaced: dict[int, Change | None] = {}  # id of a change coalesced -> its merge (first only)
    for (path, old, new, rest), items in buckets.items():
        seen = [dict(c.fixed)[name] for c in items]
        if len(items) < 2 or len(set(seen)) != len(seen):
            continue
        if set(seen) == classes:
            pairs = rest  # every class of the dimension: it does not matter
        else:  # some classes: name them together
            joined = "|".join(v for v in ordered if v in seen)
            at = [n for n, _ in items[0].fixed].index(name)
            pairs = (*rest[:at], (name, joined), *rest[at:])
        one = Change(path, old, new, _label(pairs), sum(c.cells for c in items), pairs)
        for i, c in enumerate(items):
            replaced[id(c)] = one if i == 0 else None
    if not replaced:
        return todo, False
    out = [c for c in todo if id(c) not in replaced]
    out += [c for c in (replaced[id(c)] for c in todo if id(c) in replaced) if c is not None]
    return out, True


def _show(name: str, v: ValueClass) -> str:
    return v.label if name in _BARE else f"{name}={v.label}"
