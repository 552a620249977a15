"""A candidate's verdict over a group of cells: what the exhaustive walk settles about each
backend a path judges before the one it chooses.

The decision depends on a candidate's verdict (rejected or not; for an explicit choice:
chosen, refused, or a contradiction), not on which of its rules gives it. Settling each of its
rules separately would split a group where one rule rejects the backend in some cells and
another in the rest into parts that every later candidate then walks again; a :class:`Verdict`
is settled as soon as the verdict is one over the group.

The verdict is read through :mod:`kernelpolicy.semantics`, like the resolver reads it. Over a
group given as the values each key can take, every part (the catalog requirement, each
``deny`` and ``require`` rule) is evaluated with :func:`~kernelpolicy.analysis.domain.outcomes`;
where the parts do not settle the verdict alone, one key an undecided part reads is fixed to
each of its values in turn (a Shannon expansion), so the answer is exact up to the
independence of the keys that :func:`~kernelpolicy.analysis.domain.outcomes` assumes. An
over-approximation only ever splits a group further; it never joins cells that differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kernelpolicy.analysis.domain import KeyMemo, outcomes
from kernelpolicy.dsl.conditions import Test, tests_of
from kernelpolicy.policy import Policy, Rule
from kernelpolicy.semantics import effect_outcomes, met, pick_outcome

__all__ = ["Verdict", "rule_effect", "rule_tests"]

#: a part of a verdict: the severity and rule id it rejects with, and the tests it reads
_Part = tuple[str, str, tuple[Test, ...]]
_UNKNOWN: Final = frozenset({None})


def rule_effect(r: Rule, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool]:
    """Whether *r* takes effect over a group: rejects its backend (deny, require) or applies
    (use, prefer), read through :mod:`kernelpolicy.semantics` like the resolver reads it.
    Memoised on the values of the keys the rule reads (the walk asks it of every group)."""
    return _EFFECTS(r, possible)


def _rule_effect(r: Rule, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool]:
    until = outcomes(r.until, possible) if r.until is not None else (None,)
    require = outcomes(r.require, possible) if r.kind == "require" else (True,)
    return effect_outcomes(r, outcomes(r.when, possible), until, require)


class Verdict:
    """The verdict on *backend* on *path* over a group of cells: for a candidate the order
    reaches, whether it is rejected (``True``/``False``); for the explicit choice that names
    the rule ids *named*, :func:`~kernelpolicy.semantics.pick_outcome`.

    Called with the values each key can take over a group, it returns every verdict some cell
    may get (one value: settled). Answers are memoised on the values of the keys it reads.
    """

    def __init__(self, policy: Policy, path: str, backend: str, named: tuple[str, ...] | None = None) -> None:
        entry = policy.backends[path][backend]
        self.named = named
        #: a candidate the order reaches that is chosen only when asked for: always rejected
        self.never = not entry.auto and named is None
        self.requires = entry.requires
        self.rules = policy.rules_for(backend, path)
        catalog: _Part = ("catalog", entry.rule_id, tuple(tests_of(entry.requires)))
        self.parts: tuple[_Part, ...] = (catalog, *((r.severity, r.id, rule_tests(r)) for r in self.rules))
        self.keys = tuple(sorted({t.key for _, _, tests in self.parts for t in tests}))
        #: the keys each part reads (fixing another key leaves its effect as it is)
        self.part_keys = tuple(frozenset(t.key for t in tests) for _, _, tests in self.parts)
        self.conds = (entry.requires, *(c for r in self.rules for c in _conditions(r)))
        self._memo: dict[tuple[Any, ...], frozenset[Any]] = {}

    def __call__(self, possible: Mapping[str, frozenset[Any]]) -> frozenset[Any]:
        key = tuple(map(possible.get, self.keys))
        hit = self._memo.get(key)
        if hit is None:
            hit = _TRUE if self.never else self._expand({k: possible.get(k, _UNKNOWN) for k in self.keys})
            self._memo[key] = hit
        return hit

    def guide(self, possible: Mapping[str, frozenset[Any]]) -> tuple[Test, ...]:
        """What to split on next: the tests of the first part still undecided over the group
        (the catalog requirement, then the rules in their order), with those of the other
        undecided parts over the same keys, so that one split tells apart every part's values
        (and the parts where different rules reject the backend can be walked on as one)."""
        open_ = [tests for e, (_, _, tests) in zip(self._effects(possible), self.parts, strict=True) if len(e) != 1]
        if not open_:
            return ()
        keys = {t.key for t in open_[0]}
        return open_[0] + tuple(t for tests in open_[1:] for t in tests if t.key in keys)

    def _effects(self, possible: Mapping[str, frozenset[Any]]) -> list[frozenset[bool]]:
        req = frozenset(not met(o) for o in outcomes(self.requires, possible))
        return [req] + [rule_effect(r, possible) for r in self.rules]

    def _settled(self, effects: list[frozenset[bool]]) -> frozenset[Any]:
        """The verdict the parts' effects settle (empty: they do not settle it)."""
        if self.named is None:
            if any(e == _TRUE for e in effects):
                return _TRUE  # one part rejects it in every cell
            if all(e == _FALSE for e in effects):
                return _FALSE
            return frozenset()
        sure = [(sev, rid) for e, (sev, rid, _) in zip(effects, self.parts, strict=True) if e == _TRUE]
        if any(sev == "user" for sev, _ in sure):
            return frozenset({"contradiction"})
        if any(len(e) != 1 for e in effects):
            return frozenset()
        return frozenset({pick_outcome(sure, self.named)})

    def _expand(
        self, possible: dict[str, frozenset[Any]], effects: list[frozenset[bool]] | None = None
    ) -> frozenset[Any]:
        """The verdicts over *possible* (every key of :attr:`keys` given), by Shannon expansion.
        *effects*: the parts' effects over *possible*, where the caller has them. Fixing one key
        changes only the effects of the parts that read it: the others are handed down as they
        are, and each state reached is memoised like a group (:meth:`__call__` answers alike)."""
        if effects is None:
            effects = self._effects(possible)
        found = self._settled(effects)
        if found:
            return found
        key = next(
            (
                t.key
                for e, (_, _, tests) in zip(effects, self.parts, strict=True)
                if len(e) != 1
                for t in tests
                if len(possible[t.key]) > 1
            ),
            None,
        )
        if key is None:  # not reached: with every key read fixed, every part is settled
            return frozenset({True, False}) if self.named is None else frozenset({"chosen", "refused"})
        reading = [i for i, keys in enumerate(self.part_keys) if key in keys]
        seen: set[Any] = set()
        for value in possible[key]:
            sub = {**possible, key: frozenset({value})}
            memo_key = tuple(map(sub.__getitem__, self.keys))
            hit = self._memo.get(memo_key)
            if hit is None:
                narrowed = list(effects)
                for i in reading:
                    narrowed[i] = self._effect(i, sub)
                hit = self._memo[memo_key] = self._expand(sub, narrowed)
            seen |= hit
            if len(seen) > 1:
                break
        return frozenset(seen)

    def _effect(self, i: int, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool]:
        """The effect of part *i* alone (see :meth:`_effects`)."""
        if i == 0:
            return frozenset(not met(o) for o in outcomes(self.requires, possible))
        return rule_effect(self.rules[i - 1], possible)


_TRUE: Final = frozenset({True})
_FALSE: Final = frozenset({False})


#: the answers of :func:`_rule_effect`, by the rule and the values of the keys it reads
_EFFECTS: Final[KeyMemo[Rule, frozenset[bool]]] = KeyMemo(lambda r: (t.key for t in rule_tests(r)), _rule_effect)


def _conditions(r: Rule) -> tuple[Any, ...]:
    return tuple(c for c in (r.when, r.require if r.kind == "require" else None, r.until) if c is not None)


def rule_tests(r: Rule) -> tuple[Test, ...]:
    """The tests *r* reads: of its ``when``, its ``require`` (a ``require`` rule) and its ``until``."""
    return tuple(t for c in _conditions(r) for t in tests_of(c))
