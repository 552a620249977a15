"""Implications whose outcome would depend on file order, found over the finite domain.

Two implications that set one fact to different values, or one whose ``unless`` comes to hold
only after the others were applied, make the resolver's fixpoint depend on the order in which
the files were loaded. The resolver refuses such facts (:class:`~kernelpolicy.semantics.
ImplicationConflict`); this analysis finds every such set of facts before a deployment meets
it, by running the resolver's own fixpoint (:func:`kernelpolicy.semantics.imply`) over every
combination of the value classes of the dimensions the implications read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Final

from ..dsl.conditions import All, Any_, Condition, Test, evaluate, tests_of
from ..facts.record import Facts
from ..policy import Implication, Policy
from ..semantics import ImplicationConflict, imply
from .domain import Dimension, Domain
from .findings import Finding

__all__ = ["implication_conflicts"]

#: the most cells one pair of implications is checked over
_MAX_CELLS: Final = 200_000


def implication_conflicts(policy: Policy, domain: Domain) -> list[Finding]:
    """One error per set of implications that contradict each other somewhere in *domain*."""
    found: dict[frozenset[str], Finding] = {}
    key_dim = {k: d for d in domain.dims for k in d.keys}
    set_keys = frozenset(k for imp in policy.implications for k in imp.sets)
    for group in _suspects(policy.implications):
        if len(group) == 2 and _exclusive(group[0], group[1], key_dim, set_keys):
            continue
        dims = _dims_read(group, policy.implications, key_dim)
        for cell, label in _cells(dims):
            try:
                imply(Facts.from_values(cell, source="user"), policy.implications)
            except ImplicationConflict as exc:
                ids = frozenset(exc.rules)
                if ids not in found:
                    found[ids] = _finding(exc, policy, label)
    return list(found.values())


def _suspects(implications: tuple[Implication, ...]) -> Iterator[tuple[Implication, ...]]:
    """Pairs that set one key to different values, and single implications with an ``unless``
    that another implication can make true."""
    for a, b in itertools.combinations(implications, 2):
        if any(k in b.sets and b.sets[k] != v for k, v in a.sets.items()):
            yield (a, b)
    set_keys = {k for imp in implications for k in imp.sets}
    for imp in implications:
        if imp.unless is not None and {t.key for t in tests_of(imp.unless)} & set_keys:
            yield (imp,)


def _conjuncts(cond: Condition) -> Iterator[Condition]:
    """The parts of *cond* that must all hold (an ``all`` flattened)."""
    if isinstance(cond, All):
        for c in cond.children:
            yield from _conjuncts(c)
    else:
        yield cond


def _allowed(imp: Implication, dim: Dimension, set_keys: frozenset[str]) -> frozenset[int]:
    """The classes of *dim* on which *imp* may fire, judged by its tests on *dim*'s keys that no
    implication sets: each test of its ``when`` must hold (an unknown fact fails it), and no
    test its ``unless`` names alone or in an ``any`` may hold."""
    keys = set(dim.keys) - set_keys
    need = [t for t in _conjuncts(imp.when) if isinstance(t, Test) and t.key in keys]
    blocks: list[Test] = []
    if imp.unless is not None:
        parts = imp.unless.children if isinstance(imp.unless, Any_) else (imp.unless,)
        blocks = [t for t in parts if isinstance(t, Test) and t.key in keys]
    return frozenset(
        i
        for i, v in enumerate(dim.values)
        if all(evaluate(t, v.typed) is True for t in need) and not any(evaluate(t, v.typed) is True for t in blocks)
    )


def _exclusive(a: Implication, b: Implication, key_dim: dict[str, Dimension], set_keys: frozenset[str]) -> bool:
    """Whether *a* and *b* never fire on one set of facts: on a fact no implication sets, the
    domain has no value on which both may fire (``sglang.version`` ranges that do not meet, or
    ``deploy.engine: sglang`` against an ``unless`` of it). Such a pair needs no cell checked."""
    keys = {t.key for imp in (a, b) for c in (imp.when, imp.unless) if c is not None for t in tests_of(c)}
    dims = {key_dim[k].name: key_dim[k] for k in keys - set_keys if k in key_dim}
    return any(not (_allowed(a, d, set_keys) & _allowed(b, d, set_keys)) for d in dims.values())


def _dims_read(
    group: Iterable[Implication], implications: tuple[Implication, ...], key_dim: dict[str, Dimension]
) -> list[Dimension]:
    """The dimensions *group*'s conditions read, and those behind the implications that set them."""
    todo = [c for imp in group for c in (imp.when, imp.unless) if c is not None]
    seen: set[str] = set()
    dims: dict[str, Dimension] = {}
    while todo:
        for t in tests_of(todo.pop()):
            if t.key in seen:
                continue
            seen.add(t.key)
            d = key_dim.get(t.key)
            if d is not None:
                dims.setdefault(d.name, d)
            todo += [c for imp in implications if t.key in imp.sets for c in (imp.when, imp.unless) if c is not None]
    ordered = sorted(dims.values(), key=lambda d: len(d.values))
    while ordered and _size(ordered) > _MAX_CELLS:
        ordered.pop()  # the widest dimensions last: check what can be checked
    return ordered


def _size(dims: list[Dimension]) -> int:
    n = 1
    for d in dims:
        n *= len(d.values)
    return n


def _cells(dims: list[Dimension]) -> Iterator[tuple[dict[str, Any], str]]:
    for combo in itertools.product(*(d.values for d in dims)):
        cell: dict[str, Any] = {}
        for v in combo:
            cell.update(v.facts)
        label = " x ".join(f"{d.name}={v.label}" for d, v in zip(dims, combo, strict=True))
        yield cell, label or "every cell"


def _finding(exc: ImplicationConflict, policy: Policy, label: str) -> Finding:
    imps = {imp.id: imp for imp in policy.implications}
    rules = [imps[r] for r in exc.rules if r in imps]
    # point at the operator's rule where there is one: operators never edit shipped rules
    rules.sort(key=lambda imp: imp.origin.layer == "shipped")
    here = rules[0]
    others = [f"`{imp.id}` is at {imp.origin}" for imp in rules[1:]]
    return Finding(
        "implies-conflict",
        f"{exc}; the decision would depend on the order the files are loaded in",
        "error",
        here.origin.file,
        here.origin.line,
        1,
        here.id,
        help="; ".join([*others, "give one a narrower `when`, or an `unless` that excludes the other's facts"]),
        cell=label,
        field="set",
    )
