"""What one rule set adds to, or changes in, another: the cells a proof must walk again.

Two policies that share their catalog (backends, orders, models, GPUs, engines) and differ
only in some rules, implications and ``unsupported`` entries decide alike in every cell where
none of those items takes effect: a ``deny`` or ``require`` rule rejects nothing there, a
``use`` or ``prefer`` rule does not apply, an implication does not fire, an ``unsupported``
entry does not hold. :func:`delta` names those items; the exhaustive walk
(:func:`~kernelpolicy.analysis.coverage.verify` with ``scope=``) then walks only the cells
where one of them may take effect, and takes every other cell's outcome from the proof of
the shared part (a certificate, :mod:`.certificate`) or, for ``diff``, knows it unchanged.

Both walks read an item's effect through :mod:`kernelpolicy.semantics`, like the resolver
(:func:`~kernelpolicy.analysis.verdicts.rule_effect`), over-approximated: a cell an item
might change is walked; only a cell none can change is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from kernelpolicy.policy import Implication, Origin, Policy, Rule, Unsupported

__all__ = ["Delta", "delta"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Delta:
    """The items one of two policies holds and the other does not (either way round)."""

    rules: tuple[Rule, ...] = ()
    implications: tuple[Implication, ...] = ()
    unsupported: tuple[Unsupported, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules or self.implications or self.unsupported)

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids of the items, for messages and tests."""
        return (
            tuple(r.id for r in self.rules)
            + tuple(i.id for i in self.implications)
            + tuple(u.id for u in self.unsupported)
        )


def delta(a: Policy, b: Policy) -> Delta | None:
    """The rules, implications and ``unsupported`` entries that only one of *a* and *b* holds,
    or ``None`` when the two differ in more than those (their catalogs of backends, orders,
    models, GPUs or engines; or the items both hold stand in another relative order): then
    every cell may decide differently and nothing can be skipped."""
    if (
        _plain(a.backends) != _plain(b.backends)
        or _plain(a.orders) != _plain(b.orders)
        or a.models != b.models
        or a.gpus != b.gpus
        or _plain(a.engines) != _plain(b.engines)
    ):
        return None
    parts: list[tuple[Any, ...]] = []
    for xs, ys in ((a.rules, b.rules), (a.implications, b.implications), (a.unsupported, b.unsupported)):
        found = _changed(xs, ys)
        if found is None:
            return None
        parts.append(found)
    return Delta(*parts)


def _bare(x: Any) -> Any:
    """*x* as what it says: where it is written (file, line) left out, its layer kept."""
    origin = getattr(x, "origin", None)
    if isinstance(origin, Origin):
        return replace(x, origin=Origin("", 0, origin.layer))
    return x


def _key(x: Any) -> Any:
    """*x* as what it says, hashable (an implication's facts as their items; where something
    still cannot be hashed, its text: two equal items may then read as different, which walks
    more, never less)."""
    bare = _bare(x)
    sets = getattr(bare, "sets", None)
    if isinstance(sets, Mapping):  # a dict: as its items, in one order
        bare = replace(bare, sets=tuple(sorted(sets.items(), key=repr)))
    try:
        hash(bare)
    except TypeError:
        return repr(bare)
    return bare


def _plain(x: Any) -> Any:
    """A catalog (mappings and sequences of entries) as what it says, for comparison."""
    if isinstance(x, Mapping):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return tuple(_plain(v) for v in x)
    return _bare(x)


def _changed(xs: tuple[_T, ...], ys: tuple[_T, ...]) -> tuple[_T, ...] | None:
    """The items of *xs* not in *ys* and of *ys* not in *xs*, compared by what they say
    (``None``: the shared ones stand in another order)."""
    bx, by = [_key(x) for x in xs], [_key(y) for y in ys]
    sx, sy = set(bx), set(by)
    only_x = [x for x, k in zip(xs, bx, strict=True) if k not in sy]
    only_y = [y for y, k in zip(ys, by, strict=True) if k not in sx]
    if [k for k in bx if k in sy] != [k for k in by if k in sx]:
        return None
    return (*only_x, *only_y)
