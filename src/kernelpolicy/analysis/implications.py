"""Implications whose outcome would depend on file order, found over the whole finite domain.

Two implications that set one fact to different values, or one whose ``unless`` comes to hold
only after the others were applied, make the resolver's fixpoint depend on the order in which
the files were loaded. The resolver refuses such facts (:class:`~kernelpolicy.semantics.
ImplicationConflict`); this analysis finds every such set of facts before a deployment meets it.

The fixpoint is computed symbolically, for every cell at once (:meth:`~.compile.Compiled.fixpoint`:
each key's value and the implication that set it, as decision diagrams), and the two conditions
the resolver checks at the fixpoint become diagrams of the cells where they hold: a setter that
no longer fires, and another implication that sets the same key to another value and fires
too. For each such region a witness cell is run through the resolver's own fixpoint
(:func:`kernelpolicy.semantics.imply`), whose conflict the finding reports in its words.
"""

from __future__ import annotations

from typing import Final

from ..facts.record import Facts
from ..policy import Implication, Policy
from ..semantics import ImplicationConflict, imply
from .compile import Compiled
from .domain import Domain
from .findings import Finding
from .mdd import Manager

__all__ = ["implication_conflicts"]


#: Findings by what they are a function of (:func:`_key`): the language server proves every edit
#: of an operator file on the same shipped implications, and most edits refine other dimensions.
_FOUND: dict[str, list[Finding]] = {}
_FOUND_MOST: Final = 8


def implication_conflicts(policy: Policy, domain: Domain, manager: Manager | None = None) -> list[Finding]:
    """One error per set of implications that contradict each other somewhere in *domain*
    (compiled in *manager*, one over *domain*'s levels, where given)."""
    imps = policy.implications
    if not imps:
        return []
    key = _key(imps, domain)
    hit = _FOUND.get(key)
    if hit is None:
        hit = _found(policy, domain, manager)
        if len(_FOUND) >= _FOUND_MOST:
            _FOUND.pop(next(iter(_FOUND)))
        _FOUND[key] = hit
    return list(hit)


def _key(imps: tuple[Implication, ...], domain: Domain) -> str:
    """What the findings are a function of: the implications (where each is written included)
    and, in domain order, the dimensions they read or set and the model's kind (the fixpoint
    diagrams, the witnesses and the labels read nothing else)."""
    from ..dsl.conditions import tests_of  # noqa: PLC0415

    keys = {"model.is_moe"}
    for imp in imps:
        keys |= set(imp.sets)
        keys |= {t.key for c in (imp.when, imp.unless) if c is not None for t in tests_of(c)}
    dims = [d for d in domain.dims if keys.intersection(d.keys) or d.name in keys]
    return repr((imps, dims))


def _found(policy: Policy, domain: Domain, manager: Manager | None) -> list[Finding]:
    imps = policy.implications
    c = Compiled(policy, domain, manager=manager)
    m = c.m
    regions = _conflicting(c, imps)
    found: dict[frozenset[str], Finding] = {}
    for region in regions:
        if region == m.false:
            continue
        for kind in (c.moe_index, c.dense_index):
            cell = m.witness(m.AND(region, c.moe if kind == c.moe_index else m.NOT(c.moe)), bool, c.default)
            if cell is None:
                continue
            raw, _ = c.facts(cell)
            try:
                imply(Facts.from_values(raw, source="user"), imps)
            except ImplicationConflict as exc:
                ids = frozenset(exc.rules)
                if ids not in found:
                    label = " x ".join(
                        f"{d.name}={d.values[cell[lv]].label}"
                        for lv, d in enumerate(c.dims)
                        if d.name in _read(imps, exc)
                    )
                    found[ids] = _finding(exc, policy, label or "every cell")
            break
    return list(found.values())


def _conflicting(c: Compiled, imps: tuple[Implication, ...]) -> list[int]:
    """The regions (boolean diagrams) where the resolver's fixpoint check fails: per key and
    setter, where it no longer fires at the fixpoint, and where a rival that sets another value fires."""
    m = c.m
    now, setter = c.fixpoint(imps)
    fires_at = [c.compose(c.fires(imp), now) for imp in imps]
    regions: list[int] = []
    for k, by in setter.items():
        for i, imp in enumerate(imps):
            mine = m.eq(by, i) if k in imp.sets else m.false
            if mine == m.false:
                continue
            regions.append(m.AND(mine, m.NOT(fires_at[i])))
            rivals = [j for j, other in enumerate(imps) if j != i and other.sets.get(k, imp.sets[k]) != imp.sets[k]]
            regions += [m.AND(mine, fires_at[j]) for j in rivals]
    return regions


def _read(imps: tuple[Implication, ...], exc: ImplicationConflict) -> set[str]:
    """The dimensions the conflicting implications read (what the cell label names)."""
    from ..dsl.conditions import tests_of  # noqa: PLC0415

    named = {imp.id: imp for imp in imps}
    return {
        t.key
        for r in exc.rules
        if r in named
        for c in (named[r].when, named[r].unless)
        if c is not None
        for t in tests_of(c)
    }


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
