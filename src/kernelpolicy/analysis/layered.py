"""An operator's layer proven on the proven shipped tables: only the cells it can change are decided again.

An operator file (a ``policy`` or ``user`` layer) changes a path's decision only where one of its
entries is in force: a ``deny``/``require`` rule where it rejects its backend, a ``use`` or
``prefer`` rule where it is active, an ``order`` entry where its ``when`` holds, a refusing
``unsupported`` entry where its ``when`` holds. Everywhere else the layered tables decide as the
shipped tables alone do. So the proof of an operator file (``check FILE``, the language
server's diagnostics on every edit) takes the shipped tables' outcome diagrams (their
certificate, or the copy this process keeps), makes them on the layered domain's levels, and
decides again only inside the layer's region (:meth:`~.compile.Compiled.outcome`); the layered
outcome is the same function of the cells as a compile from scratch, which
``tests/property/test_layered_proof.py`` checks on random layers.

The layered domain refines the shipped one (its tests are a superset): each of its classes lies
in the shipped class whose values the shipped tests read alike (:func:`_cover`). Where it does
not, or where the layer redefines what the shipped tables hold (a rule id of theirs, the
catalog), or the options differ, there is no base and the proof is compiled whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final, NamedTuple, TypeVar

from ..dsl.conditions import Test
from ..policy import Order, Policy, Rule, Unsupported
from . import certificate
from .compile import Compiled
from .domain import Dimension, Domain, ValueClass, build_domain
from .mdd import Manager

__all__ = ["Base", "adopt", "keep", "kept", "layer", "region", "reused"]

#: Bases this process keeps (the language server proves each edit on the same shipped tables).
_KEPT_MOST: Final = 2
_KEPT: dict[str, Base] = {}
#: The manager a layer was last proven in, its domain, and the base's outcomes made in it.
_MANAGED: dict[tuple[str, bool], tuple[str, Manager, dict[str, int]]] = {}
#: A manager is used again while it holds fewer nodes than this (with its memos, about 250 MB at the limit).
_REUSE_MOST: Final = 300_000


@dataclass(frozen=True)
class Base:
    """The shipped tables' proof: their policy and each path's outcome diagram as a certificate
    keeps it (``levels``, ``sizes``, ``nodes``, ``roots``)."""

    policy: Policy
    explicit: bool
    diagrams: Mapping[str, Any]
    #: the witnesses its proof resolved, ``(path, outcome) -> decision``, where that proof ran in
    #: this process (a certificate keeps none): a layer's outcome that occurs only outside the
    #: layer's region is decided there as here, and its witness is read, not resolved again
    witnesses: Mapping[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def domain(self) -> Domain:
        """The domain the diagrams are over (built once: every edit the server proves reads it)."""
        return build_domain(self.policy, explicit=self.explicit)


def kept(key: str) -> Base | None:
    """The base this process keeps under *key* (the shipped files' certificate key)."""
    return _KEPT.get(key)


def keep(key: str, base: Base) -> Base:
    """Keep *base* under *key* for this process (the newest :data:`_KEPT_MOST`)."""
    if len(_KEPT) >= _KEPT_MOST:
        _KEPT.pop(next(iter(_KEPT)))
    _KEPT[key] = base
    return base


def reused(base: Base, domain: Domain) -> Manager | None:
    """The manager the last layer on *base* was proven in, where *domain* is that layer's and
    the manager is under :data:`_REUSE_MOST` nodes: every operation it memoises is named by what
    it computes, so the next edit reads again what it left unchanged (the language server's
    edit loop); ``None``: a new one."""
    held = _MANAGED.get((base.policy.digest, base.explicit))
    if held is None or held[0] != _domain_key(domain) or len(held[1]) >= _REUSE_MOST:
        return None
    return held[1]


def adopt(base: Base, domain: Domain, manager: Manager, outcomes: Mapping[str, int]) -> None:
    """Take *manager* (over *domain*, *base*'s own, holding *base*'s *outcomes*: its proof, just
    made in this process) as the one the next layer on *base* is proven in, where that layer's
    domain is the same and the manager is small enough (:func:`reused`): no remap, and what the
    ground's proof compiled is read again."""
    _MANAGED.clear()
    _MANAGED[(base.policy.digest, base.explicit)] = (_domain_key(domain), manager, dict(outcomes))


def layer(base: Base, c: Compiled) -> bool:
    """Put *c* (the layered tables, compiled) on *base*: its outcomes are then decided again only
    inside :func:`region`. ``False`` (and *c* left whole) where the layer cannot stand on it."""
    above = _above(c.policy, base.policy)
    if above is None:
        return False
    key = (base.policy.digest, base.explicit)
    held = _MANAGED.get(key)
    made = held[2] if held is not None and held[1] is c.m else _outcomes_in(base, c)
    if made is None:
        return False
    _MANAGED.clear()  # one manager kept: the newest
    _MANAGED[key] = (_domain_key(c.domain), c.m, made)
    c.layer_on(made, region(c, above), above.rules)
    return True


def _domain_key(domain: Domain) -> str:
    """What a manager's levels stand for: each dimension's classes and what they hold."""
    return repr(
        [(d.name, d.moe_only, [(v.label, sorted(v.facts.items()), v.weight) for v in d.values]) for d in domain.dims]
    )


_E = TypeVar("_E", Rule, Order, Unsupported)


class _Above(NamedTuple):
    """The entries of a policy that its base does not hold."""

    rules: tuple[Rule, ...]
    orders: tuple[Order, ...]
    refusals: tuple[Unsupported, ...]


def region(c: Compiled, above: _Above) -> dict[str, int]:
    """Boolean, per path: the cells where an entry above the base can change the path's decision
    (an entry on other paths changes nothing here: a path's outcome reads only its own picks,
    order, rules and refusals; a contradiction elsewhere is read from the other path's outcome)."""
    out: dict[str, int] = {}
    for path, catalog in c.policy.backends.items():
        parts = [
            c.effect(r) if r.kind in ("deny", "require") else c.active(r.id)
            for r in above.rules
            if r.applies_to(path) and any(b in catalog for b in r.backends)
        ]
        parts += [c.holds(o.when) for o in above.orders if o.path == path]
        parts += [c.holds(u.when) for u in above.refusals if u.refuse and path in u.paths]
        out[path] = c.m.any_of(parts)
    return out


def _above(policy: Policy, base: Policy) -> _Above | None:
    """The entries of *policy* above *base*, where *policy* is *base* with entries added (none
    redefines a rule id of the base, its catalog, or leaves one of its entries out); else ``None``."""
    if dict(policy.backends) != dict(base.backends):
        return None
    rules = _added(policy.rules, base.rules)
    orders = _added([o for os in policy.orders.values() for o in os], [o for os in base.orders.values() for o in os])
    refusals = _added(policy.unsupported, base.unsupported)
    if rules is None or orders is None or refusals is None or any(r.id in base.by_id for r in rules):
        return None
    return _Above(rules, orders, refusals)


def _added(mine: Sequence[_E], below: Sequence[_E]) -> tuple[_E, ...] | None:
    """The entries of *mine* that *below* does not hold (an entry is its id where it is written),
    or ``None`` where *mine* leaves one of *below*'s out."""
    held = {(e.id, e.origin) for e in below}
    added = tuple(e for e in mine if (e.id, e.origin) not in held)
    return added if len(mine) - len(added) == len(below) else None


def _outcomes_in(base: Base, c: Compiled) -> dict[str, int] | None:
    """The base's outcome diagrams made in *c*'s manager on *c*'s levels, or ``None`` where
    *c*'s domain does not refine the base's."""
    data, old = base.diagrams, base.domain
    tests = old.tests_by_key
    if list(data.get("levels", ())) != [d.name for d in old.dims]:
        return None
    target: list[int] = []
    covers: list[list[int]] = []
    for d in old.dims:
        j = c.level_of.get(d.name)
        new = c.dims[j] if j is not None else None
        # a key only MoE paths read below may be read by a dense one above: a dense model's
        # decisions below never read it, so they hold for each of its values
        if new is None or (new.moe_only and not d.moe_only) or (target and j <= target[-1]):  # type: ignore[operator]
            return None
        cover = _cover(d, new, [t for k in d.keys for t in tests.get(k, ())])
        if cover is None:
            return None
        target.append(j)  # type: ignore[arg-type]
        covers.append(cover)
    m = c.m
    made: list[int] = []
    for item in data["nodes"]:
        if item[0] == "t":
            fields = [list(x) if isinstance(x, tuple) else x for x in item[1]]  # as JSON keeps them
            made.append(m.term(certificate.outcome(fields)))
            continue
        level, kids = item
        made.append(m.node(target[level], [made[kids[i]] for i in covers[level]]))
    return {path: made[i] for path, i in data["roots"].items()}


def _cover(old: Dimension, new: Dimension, tests: Sequence[Test]) -> list[int] | None:
    """For each class of *new*, the class of *old* holding its values: the one with the same
    facts, else the one the old tests read alike (two such classes decide alike: no test of the
    base tells them apart). ``None`` where a class has none."""
    out: list[int] = []
    sigs: dict[tuple[Any, ...], int] = {}
    for i, v in enumerate(old.values):
        sigs.setdefault(_signature(v, tests), i)
    for v in new.values:
        same = next((i for i, o in enumerate(old.values) if o.facts == v.facts), None)
        if same is None:
            same = sigs.get(_signature(v, tests))
        if same is None:
            return None
        out.append(same)
    return out


def _signature(v: ValueClass, tests: Sequence[Test]) -> tuple[Any, ...]:
    """How *tests* read a class: each test's answer, ``None`` where the class leaves the key unknown."""
    return tuple(None if (x := v.typed.get(t.key)) is None else bool(t.match(x)) for t in tests)
