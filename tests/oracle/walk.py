"""Exhaustive verification: every cell of the finite domain, path by path.

For each path, the domain is split lazily. A group of cells is split on a dimension while

1. a condition that shapes the path's candidate order (an ``order``, a ``prefer`` rule, a
   ``use`` rule or a user setting that picks a backend) is undecided over the group, or
2. after resolving one representative cell, the verdict of a candidate the path judged up to
   (and including) the one it chose is undecided over the group (:mod:`.verdicts`: whether
   it is rejected, whichever of its rules rejects it; for an explicit choice, whether it is
   chosen, refused or a contradiction).

Implications are taken out of the walk: the resolver applies them first and decides from
the completed facts, and a completed state is one no implication changes. So resolving every
state of the domain *as is* (without implications) decides every state any input can reach,
and the dimensions only implications read (``deep_gemm.commit``, say) never need a split.
A violation is reported only when its representative is such a completed state.

A split divides the group's classes of the dimension only into the parts the undecided
conditions tell apart (a class of eleven model types becomes "the type the rule names" and
"the other ten"); a later condition may split a part again. The outcomes over a part are
computed from every value it holds, so a settled condition is settled for each of them. The
parts over which every undecided question answers alike are walked on as one (a backend
rejected by one rule in one part and another in the next leaves the candidates after it one
walk, not two); such a join is asked every question again, and never gives back the whole group.

When neither holds, every cell of the group has the same order and the same verdict for
each candidate up to the chosen one, so the resolver chooses the same backend in every cell
(for warmup, the warmup-scoped rules of the chosen backend are settled too). The resolver
itself decides each representative: the check verifies what runs, not a model of it.

With a *scope* (:mod:`.scope`: the items an operator file adds, or the items two policies do
not share), the walk first splits on whether one of them may take effect and leaves out every
group where none can: those cells decide as the policy without them (see :func:`verify`).

Each group's decision is then checked against the invariants:

- ``no-backend``: a path the model has gets no valid backend;
- ``denied-chosen``: the chosen backend is denied by a rule that applies (and no explicit
  choice overrode it);
- ``unmet-requirement``: the chosen backend's catalog requirement or a ``require`` rule
  for it is false (and no explicit choice overrode it);
- ``warmup``: warmup lists a kernel no path chose, or misses one that a path chose and no
  warmup rule denies;
- ``contradiction``: explicit choices of one layer contradict each other.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Any, Final

from kernelpolicy.analysis.domain import (
    Dimension,
    Domain,
    Group,
    IdMemo,
    KeyMemo,
    ValueClass,
    build_domain,
    for_path,
    implied_sources,
    merge,
    outcomes,
    pool_values,
    possible_values,
    rule_paths,
)
from kernelpolicy.decision import Candidate, Decision
from kernelpolicy.dsl.conditions import Test, evaluate, tests_of
from kernelpolicy.facts.record import Facts, normalise_value, typed_value
from kernelpolicy.policy import Implication, Policy, Rule, Unsupported
from kernelpolicy.resolver import ContradictionError, resolve, resolve_path
from kernelpolicy.semantics import DECIDED_PATHS, ImplicationConflict, applies, gravity, imply, met, rule_state

from .collector import collector_paused
from .lifetime import die_with_parent
from .scope import Delta
from .verdicts import Verdict, rule_effect, rule_tests

__all__ = ["PATHS", "Coverage", "PathGroup", "Violation", "verify"]

PATHS: Final = DECIDED_PATHS
_UNKNOWN: Final = frozenset({None})
_NO: Final = frozenset({False})
#: decisions a walker keeps for reuse before it starts afresh
_DECIDED_MAX: Final = 50_000


@dataclass(frozen=True)
class Violation:
    """An invariant a group of cells breaks."""

    code: str
    path: str
    group: Group
    message: str
    rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathGroup:
    """One group of cells of one path, its outcome, and the invariants it breaks."""

    path: str
    group: Group
    backend: str | None
    candidates: tuple[Candidate, ...]  #: as the path's decision lists them
    explicit: str | None  #: where an explicit choice for the path came from
    when: Mapping[str, bool | None]  #: each ``prefer`` rule's applicability in the group's representative
    error: str | None = None  #: resolving raised (contradictory explicit choices)
    violations: tuple[Violation, ...] = ()
    #: rules that reject a candidate judged before the chosen one in some cell of the group
    fires: frozenset[str] = frozenset()
    #: ... as the only reason in some cell (so the rule changes that cell's decision)
    sole: frozenset[str] = frozenset()
    #: ... as the gravest reason in some cell (the rule the decision names)
    first: frozenset[str] = frozenset()
    #: ``unsupported`` declarations that cover the group (the path has no backend, knowingly)
    known: tuple[str, ...] = ()


@dataclass
class Coverage:
    """The outcome of an exhaustive run."""

    domain: Domain
    cells: int  #: cells verified per path (the domain size)
    groups: dict[str, int] = field(default_factory=dict)  #: groups per path
    resolves: int = 0
    seconds: float = 0.0
    #: groups of cells the walk left out: no item of its scope changes them (see :mod:`.scope`)
    skipped: int = 0
    violations: list[Violation] = field(default_factory=list)
    results: list[PathGroup] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass(frozen=True)
class _Judge:
    """Something whose effect must be one over a group: a rule's effect, an order's reach."""

    conds: tuple[Any, ...]
    fn: Callable[[Mapping[str, frozenset[Any]]], frozenset[Any]]
    extra: frozenset[str] = frozenset()  #: keys it reads besides those of ``conds``
    guide: Callable[[Mapping[str, frozenset[Any]]], tuple[Test, ...]] | None = None

    def settled(self, possible: Mapping[str, frozenset[Any]]) -> bool:
        return len(self.fn(possible)) == 1

    @cached_property
    def tests(self) -> tuple[Test, ...]:
        return tuple(t for c in self.conds for t in tests_of(c))


#: a dimension to split on, and its parts (classes of the full domain, each part one child)
_Split = tuple[str, list[list[ValueClass]]]


def _discriminators(
    pending: list[_Judge], implied: Mapping[str, list[Any]], possible: Mapping[str, frozenset[Any]] | None = None
) -> dict[str, list[Test | None]]:
    """For each key the *pending* conditions read (directly, or behind the implications that
    may set it), the tests that tell its values apart (``None``: whether it is known)."""
    out: dict[str, dict[int, Test | None]] = {}
    todo: list[tuple[str, Test | None]] = [(k, None) for j in pending for k in j.extra]
    todo += [
        (t.key, t)
        for j in pending
        for t in (j.guide(possible) if j.guide is not None and possible is not None else j.tests)
    ]
    while todo:
        k, t = todo.pop()
        seen = out.setdefault(k, {})
        if id(t) in seen:
            continue
        if not seen and k in implied:
            todo += [(u.key, u) for c in implied[k] for u in tests_of(c)]
        seen[id(t)] = t
    return {k: list(v.values()) for k, v in out.items()}


def _told(t: Test | None, value: Any) -> bool | None:
    """What *t* answers for *value* (``None``: unknown); for no test, whether *value* is known."""
    if t is None:
        return value is not None
    return None if value is None else t.match(value)


def _met(c: Any, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool]:
    """Whether requirement *c* counts as met, over a group (see :func:`kernelpolicy.semantics.met`)."""
    return frozenset(met(o) for o in outcomes(c, possible))


def _holds(c: Any, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool]:
    """Whether an ``order``'s condition *c* holds (true only), over a group."""
    return frozenset(o is True for o in outcomes(c, possible))


def _rule_judge(r: Rule) -> _Judge:
    conds = tuple(c for c in (r.when, r.require if r.kind == "require" else None, r.until) if c is not None)
    return _Judge(conds, lambda p: rule_effect(r, p))


def _closed_judge(implications: tuple[Implication, ...], keys: frozenset[str]) -> _Judge | None:
    """Whether a group's cells are *closed*: no implication sets one of *keys* (the domain's
    dimensions) that the cell leaves unknown. Only closed cells are states the resolver decides
    from; every input reaches one (``None``: no implication sets a dimension)."""
    setters = [(imp, tuple(k for k in imp.sets if k in keys)) for imp in implications]
    setters = [(imp, ks) for imp, ks in setters if ks]
    if not setters:
        return None

    def fn(possible: Mapping[str, frozenset[Any]]) -> frozenset[bool]:
        some: frozenset[bool] = frozenset({False})  # some implication fires on an unknown key
        for imp, ks in setters:
            fires = {w is True for w in outcomes(imp.when, possible)}
            blocked = {u is True for u in outcomes(imp.unless, possible)} if imp.unless is not None else {False}
            vals = [possible.get(k, frozenset({None})) for k in ks]
            unknown = {True} if any(None in v for v in vals) else set()
            if all(any(x is not None for x in v) for v in vals):
                unknown.add(False)
            step = {f and not b and u for f in fires for b in blocked for u in unknown}
            some = frozenset(a or x for a in some for x in step)
        return frozenset(not x for x in some)

    conds = tuple(c for imp, _ in setters for c in (imp.when, imp.unless) if c is not None)
    return _Judge(conds, fn, frozenset(k for _, ks in setters for k in ks))


def _scope_judge(scope: Delta, path: str, policy: Policy) -> _Judge:
    """Whether some item of *scope* may take effect on *path*'s decision or its checks in a
    group (``True``: walk it; ``{False}``: no item can change a cell of it, skip it). For
    *path*: its rules and ``unsupported`` entries, the warmup rules of its backends, every
    implication (it decides which cells are completed states). ``None``: nothing of *scope*
    matters here.

    Another path's explicit picks only ever take a violation of this path back (where they
    contradict, the resolver decides nothing): a skipped cell decides as the proof it is
    joined with, so it breaks nothing there either."""
    mine = policy.backends.get(path, {})
    rules = []
    for r in scope.rules:
        paths = rule_paths(r, policy)
        if path in paths or ("warmup" in paths and any(b in mine for b in r.backends)):
            rules.append(r)
    unsupported = [u for u in scope.unsupported if path in u.paths]
    imps = scope.implications
    if not (rules or unsupported or imps):
        return _Judge((), lambda possible: _NO)

    def fn(possible: Mapping[str, frozenset[Any]]) -> frozenset[bool]:
        may, may_not = False, True
        effects = [rule_effect(r, possible) for r in rules]
        effects += [_holds(u.when, possible) for u in unsupported]
        effects += [_holds(imp.when, possible) for imp in imps]
        for e in effects:
            may = may or True in e
            may_not = may_not and False in e
        return frozenset(x for x, ok in ((True, may), (False, may_not)) if ok)

    conds = [c for r in rules for c in (r.when, r.require if r.kind == "require" else None, r.until)]
    conds += [u.when for u in unsupported] + [imp.when for imp in imps]
    return _Judge(tuple(c for c in conds if c is not None), fn)


_Task = tuple[str, int, int]  #: (path, index of the GPU class, index of the model kind)


@dataclass(frozen=True)
class _Course:
    """What stays the same over the walk of one task (:meth:`_Walker.walk_task`): the path,
    whether its models are MoE, the judges that shape its order, and the rules behind its
    explicit picks (:meth:`_Walker.order_conditions`)."""

    path: str
    moe: bool
    conds: tuple[_Judge, ...]
    order_rules: tuple[Rule, ...]


@dataclass(frozen=True)
class _Part:
    """A child of a task's first splits, walked apart from the rest (:meth:`_Walker.plan`):
    the index of the child taken at each split from the task's root."""

    route: tuple[int, ...]


class _Walker:
    def __init__(
        self,
        policy: Policy,
        domain: Domain,
        original: Policy | None = None,
        path: str | None = None,
        scope: Delta | None = None,
    ) -> None:
        self.path = path  #: the one path this walker walks (``None``: it hands each task to one)
        #: walk only the cells where an item of the scope may take effect (``None``: every cell)
        self.scope = scope
        self.scopes: dict[str, _Judge | None] = {}
        self.skipped = 0  #: groups of cells left out of the walk (no item of the scope changes them)
        #: the part of a task this walker walks: the child to take at each of the first splits
        #: (empty: the whole task; see :meth:`plan`)
        self.route: tuple[int, ...] = ()
        #: while planning, the depth at which a split hands each child out as a :class:`_Part`
        self.depth = 0
        self._trail: list[int] = []  #: the children taken from the task's root to here
        self.by_path: dict[str, _Walker] = {}
        self.policy = policy
        self.original = original
        self.domain = domain
        self.key_dim: dict[str, Dimension] = {k: d for d in domain.dims for k in d.keys}
        self.moe_keys = tuple(k for d in domain.dims if d.moe_only for k in d.keys)
        self.index = {d.name: i for i, d in enumerate(domain.dims)}
        self.dim_by_name = {d.name: d for d in domain.dims}
        self._bases: dict[bool, _Bases] = {}
        self._usages: dict[tuple[str, str], _Usage] = {}
        #: decisions by path and representative facts (see :meth:`decide`)
        self._decided: dict[Any, tuple[Facts, Decision | ContradictionError]] = {}
        self.implied = implied_sources(policy)
        self.resolves = 0
        self.judges: dict[str, _Judge] = {}
        self._elsewhere: dict[str, list[Rule]] = {}
        self._uses: dict[tuple[str, str], list[Rule]] = {}
        self._unsupported: dict[str, list[Unsupported]] = {}
        #: the rules whose applicability a group records (contradicting ``prefer`` rules)
        self.prefers = [r for r in policy.rules if r.kind == "prefer"]
        #: per model kind (MoE or not), whether cells are closed (only for a walk of closed states)
        self.closed: dict[bool, _Judge | None] = {}
        if original is not None:
            for moe in (True, False):
                keys = frozenset(k for d in domain.dims if moe or not d.moe_only for k in d.keys)
                self.closed[moe] = _closed_judge(original.implications, keys)

    def scope_for(self, path: str) -> _Judge | None:
        if path not in self.scopes:
            self.scopes[path] = _scope_judge(self.scope, path, self.policy) if self.scope is not None else None
        return self.scopes[path]

    def rule_judge(self, r: Rule) -> _Judge:
        j = self.judges.get(r.id)
        if j is None:
            j = self.judges[r.id] = _rule_judge(r)
        return j

    # -- what shapes a path's order and explicit pick
    def uses_of(self, deny: Rule, path: str) -> list[Rule]:
        """The ``use`` rules for *path* that may pick a backend *deny* names."""
        found = self._uses.get((deny.id, path))
        if found is None:
            found = self._uses[(deny.id, path)] = [
                r
                for r in self.policy.rules
                if r.kind == "use" and path in rule_paths(r, self.policy) and set(r.backends) & set(deny.backends)
            ]
        return found

    def order_conditions(self, path: str) -> tuple[list[_Judge], list[Rule]]:
        conds = [_Judge((o.when,), partial(_holds, o.when)) for o in self.policy.orders.get(path, ())]
        rules: list[Rule] = []
        use_targets: set[str] = set()
        for r in self.policy.rules:
            if r.kind == "prefer" and r.applies_to(path):
                rules.append(r)
            elif r.kind == "use" and path in rule_paths(r, self.policy):
                rules.append(r)
                use_targets.update(r.backends)
        for r in self.policy.rules:
            if r.kind == "deny" and r.layer == "user" and r.applies_to(path) and use_targets & set(r.backends):
                rules.append(r)
        return conds, rules

    def split_on(
        self,
        pending: list[_Judge],
        fixed: Mapping[str, ValueClass],
        moe: bool,
        possible: Mapping[str, frozenset[Any]],
    ) -> tuple[str, list[list[ValueClass]]] | None:
        """The open dimension to split on next, and its parts: among the dimensions the first
        undecided condition tells apart (else any undecided one), the one that leaves the
        smallest share of its parts with an undecided condition (one step of lookahead),
        then the earliest. A dimension splits only into the classes those conditions tell
        apart: a later condition may split a part again."""
        opened = self._open(_discriminators(pending[:1], self.implied, possible), fixed, moe)
        if not opened:
            opened = self._open(_discriminators(pending, self.implied), fixed, moe)
        if len(opened) <= 1:
            return next(iter(opened.items()), None)
        best: tuple[float, int, str] | None = None
        for name, blocks in opened.items():
            d = self.domain.dims[self.index[name]]
            open_children = 0
            for block in blocks:
                trial = dict(possible)
                for k in d.keys:
                    trial[k] = frozenset(v.typed.get(k) for v in block)
                if any(not j.settled(trial) for j in pending):
                    open_children += 1
            score = (open_children / len(blocks), self.index[name], name)
            if best is None or score < best:
                best = score
        assert best is not None
        return best[2], opened[best[2]]

    def _open(
        self, discs: Mapping[str, list[Test | None]], fixed: Mapping[str, ValueClass], moe: bool
    ) -> dict[str, list[list[ValueClass]]]:
        """The dimensions *discs* split into two or more parts, and their parts."""
        out: dict[str, list[list[ValueClass]]] = {}
        for k in discs:
            d = self.key_dim.get(k)
            if d is None or d.name in out or (d.moe_only and not moe):
                continue
            cur = fixed.get(d.name)
            classes = cur.members if cur is not None else [m for v in d.values for m in v.members]
            parts: dict[tuple[Any, ...], list[ValueClass]] = {}
            for v in classes:
                sig = tuple(_told(t, v.typed.get(key)) for key in d.keys for t in discs.get(key, ()))
                parts.setdefault(sig, []).append(v)
            if len(parts) > 1:
                out[d.name] = list(parts.values())
        return out

    def bases(self, moe: bool) -> _Bases:
        """What a group that fixes no dimension holds (see :class:`_Bases`), per model kind."""
        found = self._bases.get(moe)
        if found is None:
            found = self._bases[moe] = _Bases.of(self.domain, self.policy, moe, self.moe_keys)
        return found

    def facts_of(self, fixed: Mapping[str, ValueClass], moe: bool) -> dict[str, Any]:
        """The facts of the group's representative (see :meth:`represent`)."""
        return self.represent(fixed, moe)[0]

    def represent(self, fixed: Mapping[str, ValueClass], moe: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """The facts of the group's representative, checked, and as conditions compare them:
        each dimension's fixed class, else its *unknown* class (else its first), read as the
        base with the fixed dimensions replaced."""
        base = self.bases(moe)
        values, typed = dict(base.values), dict(base.typed)
        for name, v in fixed.items():
            d = self.dim_by_name[name]
            if d.moe_only and not moe:
                continue
            for k in base.default_keys[name]:
                del values[k], typed[k]
            mine, mine_typed = class_facts(v)
            values.update(mine)
            typed.update(mine_typed)
        if not moe:
            values.pop("quant.moe_scheme", None)
            typed.pop("quant.moe_scheme", None)
        elif "quant.moe_scheme" not in values and "quant.scheme" in values:
            values["quant.moe_scheme"] = values["quant.scheme"]
            typed["quant.moe_scheme"] = typed["quant.scheme"]
        return values, typed

    def weight(self, fixed: Mapping[str, ValueClass], moe: bool) -> int:
        """The cells of the group: the fixed classes' weights times every open dimension's size."""
        n = self.bases(moe).cells
        for name, v in fixed.items():
            if name == "model.is_moe":
                continue
            d = self.dim_by_name[name]
            if not (d.moe_only and not moe):
                n //= d.size  # exact: the base counts every open dimension's size
            n *= v.weight
        return n

    def tasks(self) -> list[_Task]:
        """Independent parts of the walk: (path, GPU class, model kind). The dense path of MoE
        models is walked with that of dense models when nothing it reads tells them apart."""
        kinds = self.domain.dim("model.is_moe")
        blind = self.dense_blind_to_moe
        return [
            (path, gi, mi)
            for path in PATHS
            for gi in range(len(self.domain.dim("gpu.sm").values))
            for mi, m in enumerate(kinds.values)
            if (not (blind and m.facts["model.is_moe"]) if path == "dense" else m.facts["model.is_moe"])
        ]

    @cached_property
    def dense_blind_to_moe(self) -> bool:
        """Whether the dense path decides alike for MoE and dense models: no condition that can
        matter to it (the dense path's own, implications, warmup rules of dense backends) reads
        whether the model is MoE or a fact only MoE models have."""
        moe_keys = {"model.is_moe"} | {k for d in self.domain.dims if d.moe_only for k in d.keys}
        scope = self.scope_for("dense")
        if scope is not None and any(t.key in moe_keys for t in scope.tests):
            return False  # which cells the walk skips may tell MoE models apart
        dense = self.policy.backends.get("dense", {})
        for owner, paths, c in self.domain.conditions:
            if not ({"dense", "*"} & paths or ("warmup" in paths and self._warms_dense(owner, dense))):
                continue
            if any(t.key in moe_keys for t in tests_of(c)):
                return False
        return True

    def _warms_dense(self, owner: str, dense: Mapping[str, Any]) -> bool:
        r = self.policy.by_id.get(owner)
        if r is not None:
            return any(b in dense for b in r.backends)
        return any(e.rule_id == owner for e in dense.values())

    def walk_task(self, task: _Task, route: tuple[int, ...] = ()) -> list[PathGroup]:
        """One part of the walk, over the domain as the task's path sees it (:func:`for_path`):
        the whole task, or the child *route* names (see :meth:`plan`)."""
        out = self._task(task, route, 0)
        assert all(isinstance(x, PathGroup) for x in out)
        return out  # type: ignore[return-value]

    def plan(self, task: _Task, depth: int) -> list[PathGroup | _Part]:
        """*task* cut into parts that can be walked apart: the walk down to *depth* splits,
        with each child there handed out as a :class:`_Part` (its route) instead of walked,
        and the groups settled above it. Walking each part (``walk_task(task, part.route)``)
        and putting the results in their places gives the groups of the whole walk, in its
        order: the walk is deterministic, so every part takes the same splits down to it.
        A task whose groups are copied after the walk (the dense path of MoE models) is one part."""
        if not self.splittable(task):
            return [_Part(())]
        return self._task(task, (), depth)

    def splittable(self, task: _Task) -> bool:
        """Whether *task*'s groups are all walked (not some copied from others after the walk)."""
        walker = self._for(task[0])
        moe = bool(walker.domain.dim("model.is_moe").values[task[2]].facts["model.is_moe"])
        return not (task[0] == "dense" and not moe and walker.dense_blind_to_moe)

    def _for(self, path: str) -> _Walker:
        if self.path is not None:
            return self
        sub = self.by_path.get(path)
        if sub is None:
            domain = for_path(self.domain, path)
            sub = self.by_path[path] = _Walker(self.policy, domain, self.original, path, self.scope)
        return sub

    def _task(self, task: _Task, route: tuple[int, ...], depth: int) -> list[PathGroup | _Part]:
        path = task[0]
        if self.path is None:
            sub = self._for(path)
            before, skipped = sub.resolves, sub.skipped
            out = sub._task(task, route, depth)
            self.resolves += sub.resolves - before
            self.skipped += sub.skipped - skipped
            return out
        self.route, self.depth = route, depth
        try:
            return self._path_task(task)
        finally:
            self.route, self.depth = (), 0

    def _path_task(self, task: _Task) -> list[PathGroup | _Part]:
        path, gi, mi = task
        g = self.domain.dim("gpu.sm").values[gi]
        m = self.domain.dim("model.is_moe").values[mi]
        conds, order_rules = self.order_conditions(path)
        # an entry that refuses the path is settled before the candidates are judged: where it
        # holds, no verdict needs a split (judged after them, it split every part they left;
        # the dense walk of sm90 with SGLang's fbgemm_fp8 refusal: 15,848 groups, 8,100 first)
        conds = conds + [self.holds_judge(u) for u in self.unsupported(path) if u.refuse]
        fixed = {"gpu.sm": g, "model.is_moe": m}
        course = _Course(path, bool(m.facts["model.is_moe"]), tuple(conds), tuple(order_rules))
        out = list(self._walk(course, fixed))
        if not self.splittable(task):  # the dense path of MoE models decides as dense models'
            kind = next(v for v in self.domain.dim("model.is_moe").values if v.facts["model.is_moe"])
            again = replace(course, moe=True)
            out += [x for pg in out if isinstance(pg, PathGroup) for x in self._for_moe_models(pg, kind, again)]
        return out

    def _for_moe_models(self, pg: PathGroup, kind: ValueClass, course: _Course) -> Iterator[PathGroup | _Part]:
        """*pg*, a group of dense models' cells, as the same group of MoE models' cells. One
        that breaks an invariant is walked again (which of its cells are states the resolver
        decides from may depend on facts only MoE models have)."""
        fixed = {**pg.group.fixed, "model.is_moe": kind}
        if pg.violations:
            yield from self._walk(course, fixed)
            return
        yield replace(pg, group=Group(fixed, self.weight(fixed, True), self.facts_of(fixed, True)))

    def _walk(
        self, course: _Course, fixed: dict[str, ValueClass], possible: dict[str, frozenset[Any]] | None = None
    ) -> Iterator[PathGroup | _Part]:
        moe = course.moe
        if possible is None:
            possible = self.possible(fixed, moe)
        scope = self.scope_for(course.path)
        if scope is not None:
            touched = scope.fn(possible)
            if True not in touched:
                self.skipped += 1  # no item of the scope changes a cell here: the certificate's
                return
            split = self.split_on([scope], fixed, moe, possible) if False in touched else None
            if split is not None:
                yield from self._split(course, split, fixed, possible, [scope])
                return
        yield from self._decide(course, fixed, possible)

    def _decide(
        self, course: _Course, fixed: dict[str, ValueClass], possible: dict[str, frozenset[Any]]
    ) -> Iterator[PathGroup | _Part]:
        """Resolve the group's representative, or split the group where it does not decide
        for every cell of it."""
        path, moe = course.path, course.moe
        pending = [j for j in course.conds if not j.settled(possible)]
        for r in course.order_rules:
            if r.kind == "deny" and not any(True in rule_effect(u, possible) for u in self.uses_of(r, path)):
                continue  # a user's deny matters to the explicit pick only where a `use` may pick
            j = self.rule_judge(r)
            if not j.settled(possible):
                pending.append(j)
        split = self._next_split(pending, fixed, moe, possible)
        if split is not None:
            yield from self._split(course, split, fixed, possible, pending)
            return
        facts_raw, typed_raw = self.represent(fixed, moe)
        group = Group(dict(fixed), self.weight(fixed, moe), facts_raw)
        facts, decision = self.decide(path, facts_raw, typed_raw)
        if isinstance(decision, ContradictionError):
            # the explicit picks are settled: every cell of the group raises alike; settings
            # of the deployment that contradict each other are bad input, not a policy defect
            if not self._all_user(decision.sources):
                v = Violation("contradiction", path, group, str(decision))
                yield PathGroup(path, group, None, (), None, {}, str(decision), (v,))
            return
        pending = self._judged_pending(path, decision, possible)
        split = self._next_split(pending, fixed, moe, possible)
        if split is not None:
            yield from self._split(course, split, fixed, possible, pending)
            return
        typed = decision.facts.typed()
        when = {r.id: _state(r, typed) for r in self.prefers}
        found = tuple(_check(path, group, decision, self.policy))
        closed_here = not found or self._closure_inside(group, moe)
        pending = self._violation_pending(path, found, moe, possible, closed_here)
        split = self._next_split(pending, fixed, moe, possible)
        if split is not None:
            yield from self._split(course, split, fixed, possible, pending)
            return
        known: tuple[str, ...] = ()
        closed = self.closed.get(moe)
        if not closed_here and closed is not None and closed.fn(possible) == {False}:
            found = ()  # no cell of the group is a state the resolver decides from
        elif found and self._refused_elsewhere(path, facts):
            found = ()  # explicit picks of another path contradict: the resolver decides nothing here
        elif any(v.code == "no-backend" for v in found):
            known = tuple(u.id for u in self.unsupported(path) if _holds(u.when, possible) == {True})
            if known:
                found = tuple(v for v in found if v.code != "no-backend")
        pd = decision.paths[path]
        fires, sole, first = self._usage(path, pd.candidates, pd.explicit is not None, possible)
        yield PathGroup(
            path, group, pd.backend, pd.candidates, pd.explicit, when, None, found, fires, sole, first, known
        )

    def decide(
        self, path: str, facts_raw: dict[str, Any], typed: dict[str, Any]
    ) -> tuple[Facts, Decision | ContradictionError]:
        """The resolver's decision of *path* for a representative's facts (checked, and *typed*
        as conditions compare them: :meth:`represent`), or the contradiction it raised (returned,
        not raised again: a raise would tie the memo's exception to this frame, a reference cycle).
        A group split after its representative was resolved hands a part the same representative
        where the part holds its class of the split dimension: that decision is reused, not made
        again."""
        try:
            key: Any = (path, frozenset(facts_raw.items()))
        except TypeError:  # a value that is not hashable: decide it afresh
            key = None
        hit = self._decided.get(key) if key is not None else None
        if hit is None:
            # checked once per class (:func:`class_facts`): the facts of kernelpolicy's own making
            facts = Facts._of(dict(facts_raw), dict.fromkeys(facts_raw, "user"), dict(typed))
            self.resolves += 1
            try:
                hit = (facts, resolve_path(facts, self.policy, path))
            except ContradictionError as exc:
                # kept without its traceback, whose frames would hold the memo that holds it
                hit = (facts, exc.with_traceback(None))
            if key is not None:
                if len(self._decided) >= _DECIDED_MAX:
                    self._decided.clear()
                self._decided[key] = hit
        return hit

    def unsupported(self, path: str) -> list[Unsupported]:
        found = self._unsupported.get(path)
        if found is None:
            found = self._unsupported[path] = [u for u in self.policy.unsupported if path in u.paths]
        return found

    def _closure_inside(self, group: Group, moe: bool) -> bool:
        """Whether the closure of the group's representative (its facts with every implication
        applied) is a cell of the group: then the group holds a state the resolver decides from.

        Implications only add facts the representative leaves unknown; the closure leaves the
        group exactly when it sets a dimension the group fixes to *unknown*.
        """
        if self.original is None or not self.original.implications:
            return True
        raw = Facts.from_values(group.facts, source="user")
        try:
            done = imply(raw, self.original.implications)
        except ImplicationConflict:
            return True  # reported by the implication analysis; keep what this cell breaks
        for k in done.values.keys() - raw.values.keys():
            d = self.key_dim.get(k)
            if d is not None and d.name in group.fixed and not (d.moe_only and not moe):
                return False
        return True

    def _violation_pending(
        self,
        path: str,
        found: tuple[Violation, ...],
        moe: bool,
        possible: Mapping[str, frozenset[Any]],
        closed_here: bool,
    ) -> list[_Judge]:
        """What must be settled before a group's violations can be reported: whether its cells
        are closed (states implications leave as they are), unless the representative's own
        closure is in the group, and, for a path without a backend, whether an ``unsupported``
        declaration covers them."""
        pending: list[_Judge] = []
        closed = self.closed.get(moe)
        if not closed_here and closed is not None and not closed.settled(possible):
            pending.append(closed)
        if any(v.code == "no-backend" for v in found):
            for u in self.unsupported(path):
                j = self.holds_judge(u)
                if not j.settled(possible):
                    pending.append(j)
        if found:
            pending += [j for j in map(self.rule_judge, self.picks_elsewhere(path)) if not j.settled(possible)]
        return pending

    def picks_elsewhere(self, path: str) -> list[Rule]:
        """The rules that shape the explicit picks of the other paths (``use`` rules, and the
        deployment's denies that cancel them): where they contradict each other the resolver
        refuses the whole deployment, so no violation of *path* stands there."""
        out = self._elsewhere.get(path)
        if out is None:
            out = self._elsewhere[path] = []
            for other in PATHS:
                if other != path:
                    _, rules = self.order_conditions(other)
                    out += [r for r in rules if r.kind != "prefer" and r not in out]
        return out

    def _refused_elsewhere(self, path: str, facts: Facts) -> bool:
        """Whether the explicit picks of another path contradict each other for *facts*."""
        if not self.picks_elsewhere(path):
            return False
        try:
            resolve(facts, self.policy)
        except ContradictionError:
            return True
        return False

    def _usage(
        self, path: str, cands: tuple[Candidate, ...], explicit: bool, possible: Mapping[str, frozenset[Any]]
    ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        """Which rules reject, alone, or first, a candidate ahead of the chosen one somewhere
        in the group (an over-approximation: rule effects are taken as independent)."""
        fires: set[str] = set()
        sole: set[str] = set()
        first: set[str] = set()
        for i, cand in enumerate(cands):
            if cand.verdict == "chosen":
                break
            if explicit and i == 0:
                continue
            key = (path, cand.backend)
            usage = self._usages.get(key)
            if usage is None:
                usage = self._usages[key] = _Usage(self.policy, path, cand.backend)
            f, s, fst = _USAGE(usage, possible)
            fires |= f
            sole |= s
            first |= fst
        return frozenset(fires), frozenset(sole), frozenset(first)

    def _all_user(self, sources: tuple[str, ...]) -> bool:
        users = {r.id.split(".env.", 1)[-1] for r in self.policy.rules if r.layer == "user"}
        return all(s in users or s.startswith("--") for s in sources)

    def _next_split(
        self,
        pending: list[_Judge],
        fixed: Mapping[str, ValueClass],
        moe: bool,
        possible: Mapping[str, frozenset[Any]],
    ) -> _Split | None:
        """The dimension to split on while some condition is undecided (``None``: none is)."""
        if not pending:
            return None
        return self.split_on(pending, fixed, moe, possible) or self._any_open(fixed, moe)

    def _any_open(self, fixed: Mapping[str, ValueClass], moe: bool) -> _Split | None:
        """A last resort when undecided conditions tell no open dimension apart directly:
        the first dimension still holding two classes of the path's domain, split into them."""
        for d in self.domain.dims:
            if d.moe_only and not moe:
                continue
            cur = fixed.get(d.name)
            blocks = [list(v.members) for v in d.values if cur is None or all(cur.covers(m) for m in v.members)]
            if len(blocks) > 1:
                return d.name, blocks
        return None

    def _split(
        self,
        course: _Course,
        split: _Split,
        fixed: dict[str, ValueClass],
        possible: Mapping[str, frozenset[Any]],
        pending: list[_Judge] | None = None,
    ) -> Iterator[PathGroup | _Part]:
        name, blocks = split
        moe = course.moe
        before = fixed.get(name)
        if pending:
            blocks = self._merged(name, blocks, fixed, moe, possible, pending)
        at = len(self._trail)
        for i, block in enumerate(blocks):
            if at < len(self.route) and i != self.route[at]:
                continue  # another part of the task walks this child (see :meth:`plan`)
            fixed[name] = merge(block)
            self._trail.append(i)
            try:
                if len(self._trail) == self.depth:
                    yield _Part(tuple(self._trail))
                else:
                    yield from self._walk(course, fixed, self.narrowed(possible, fixed, name, moe))
            finally:
                self._trail.pop()
        if before is None:
            del fixed[name]
        else:
            fixed[name] = before

    def _merged(
        self,
        name: str,
        blocks: list[list[ValueClass]],
        fixed: dict[str, ValueClass],
        moe: bool,
        possible: Mapping[str, frozenset[Any]],
        pending: list[_Judge],
    ) -> list[list[ValueClass]]:
        """*blocks*, the parts of a split on dimension *name*, with the parts over which the
        *pending* judges answer alike (over their union too, and with one of them settled) joined
        into one: a candidate rejected by one rule in one part and by another in the next is
        rejected in both, and the candidates after it are walked once for the two. A join never
        gives back the whole group, so the walk still ends; it only ever groups cells the walk
        goes on to settle (a join is never a shortcut past a judge)."""
        before = fixed.get(name)
        alike: dict[tuple[frozenset[Any], ...], list[list[ValueClass]]] = {}
        for block in blocks:
            fixed[name] = merge(block)
            alike.setdefault(self._signature(pending, self.narrowed(possible, fixed, name, moe)), []).append(block)
        out: list[list[ValueClass]] = []
        for sig, parts in alike.items():
            union = [m for b in parts for m in b]
            joinable = len(parts) > 1 and len(parts) < len(blocks) and any(len(x) == 1 for x in sig)
            fixed[name] = merge(union)
            if joinable and self._signature(pending, self.narrowed(possible, fixed, name, moe)) == sig:
                out.append(union)
            else:
                out += parts
        if before is None:
            del fixed[name]
        else:
            fixed[name] = before
        return out

    @staticmethod
    def _signature(pending: list[_Judge], possible: Mapping[str, frozenset[Any]]) -> tuple[frozenset[Any], ...]:
        return tuple(j.fn(possible) for j in pending)

    def possible(self, fixed: Mapping[str, ValueClass], moe: bool) -> dict[str, frozenset[Any]]:
        """The values each key can take over a group (:func:`possible_values`); a dense model's
        cells leave the facts only MoE models have unknown, so those keys hold nothing else.
        Without implications, the values over the whole domain with the fixed dimensions' replaced."""
        if self.policy.implications:
            out = possible_values(self.domain, fixed, self.policy)
        else:
            out = dict(self.bases(moe).possible)
            for name, v in fixed.items():
                out.update(pool_values(self.dim_by_name[name], v))
        if not moe:
            for k in self.moe_keys:
                out[k] = _UNKNOWN
        return out

    def narrowed(
        self, possible: Mapping[str, frozenset[Any]], fixed: Mapping[str, ValueClass], name: str, moe: bool
    ) -> dict[str, frozenset[Any]]:
        """:meth:`possible` for *fixed*, given *possible* for *fixed* as it was before its class
        of dimension *name* was set: the keys of *name* take that class's values, every other key
        keeps its own (each key is one dimension's). With implications, a key's values may hang
        on other keys': computed afresh."""
        if self.policy.implications:
            return self.possible(fixed, moe)
        d = self.dim_by_name[name]
        out = dict(possible)
        if not (d.moe_only and not moe):  # a dense model's MoE-only keys stay unknown
            out.update(pool_values(d, fixed[name]))
        return out

    def _judged_pending(self, path: str, decision: Decision, possible: Mapping[str, frozenset[Any]]) -> list[_Judge]:
        """What is undecided about the candidates judged up to the chosen one, then whether an
        ``unsupported`` entry that decides (``refuse``) holds (the walk settles refusals before
        the candidates, :meth:`walk_task`; one the split could not settle is asked here, last)."""
        pd = decision.paths[path]
        pending: list[_Judge] = []
        if not pd.applicable:
            return pending
        refusing = [u for u in self.unsupported(path) if u.refuse]
        refusals = [self.holds_judge(u) for u in refusing]
        if any(j.fn(possible) == {True} for j in refusals):
            return pending  # refused in every cell of the group
        undecided = [j for j in refusals if not j.settled(possible)]
        if pd.backend is None and undecided and any(pd.rule == u.id for u in refusing):
            return undecided  # the representative is refused, the group is not: split on that first
        for i, cand in enumerate(pd.candidates):
            picked = pd.explicit is not None and i == 0
            if cand.backend in self.policy.backends[path]:
                named = self._named(decision, pd.explicit) if picked and pd.explicit is not None else None
                verdict = self.verdict(path, cand.backend, named)
                if not verdict.settled(possible):
                    pending.append(verdict)
            else:  # an explicit choice of a backend the catalog does not list: its rules decide
                pending += [
                    j
                    for j in map(self.rule_judge, self.policy.rules_for(cand.backend, path))
                    if not j.settled(possible)
                ]
            if cand.verdict == "chosen":
                break
        chosen = pd.backend
        if chosen is not None:
            for r in self.policy.rules_for(chosen, "warmup"):
                j = self.rule_judge(r)
                if not j.settled(possible):
                    pending.append(j)
        return pending + undecided

    def _named(self, decision: Decision, source: str) -> tuple[str, ...]:
        """The rule ids the explicit choice *source* names (those it may override)."""
        allowed = tuple(decision.facts.get("deploy.allow_rules", ()) or ())
        for r in self.policy.rules:
            if r.kind == "use" and source in (r.id, r.id.split(".env.", 1)[-1]):
                return r.overrides + (allowed if r.layer == "user" else ())
        return allowed

    def verdict(self, path: str, backend: str, named: tuple[str, ...] | None = None) -> _Judge:
        """The verdict on a candidate over a group (see :mod:`.verdicts`)."""
        key = f"verdict:{path}:{backend}:{named}"
        j = self.judges.get(key)
        if j is None:
            v = Verdict(self.policy, path, backend, named)
            j = self.judges[key] = _Judge(v.conds, v, guide=v.guide)
        return j

    def holds_judge(self, u: Unsupported) -> _Judge:
        """Whether an ``unsupported`` entry's ``when`` holds (true only), over a group."""
        key = f"unsupported:{u.id}"
        j = self.judges.get(key)
        if j is None:
            j = self.judges[key] = _Judge((u.when,), partial(_holds, u.when))
        return j


@dataclass(frozen=True)
class _Bases:
    """What a group that fixes no dimension holds, for one model kind: the walk reads each group
    as this with its fixed dimensions replaced (a handful), not by visiting every dimension."""

    values: Mapping[str, Any]  #: each dimension's *unknown* class (else its first), checked
    typed: Mapping[str, Any]  #: the same, as conditions compare them
    default_keys: Mapping[str, tuple[str, ...]]  #: the keys each dimension's default class sets
    possible: Mapping[str, frozenset[Any]]  #: the values of every key over the whole domain
    cells: int  #: the product of the sizes of the dimensions the model kind has

    @classmethod
    def of(cls, domain: Domain, policy: Policy, moe: bool, moe_keys: tuple[str, ...]) -> _Bases:
        values: dict[str, Any] = {}
        typed: dict[str, Any] = {}
        default_keys: dict[str, tuple[str, ...]] = {}
        cells = 1
        for d in domain.dims:
            if d.moe_only and not moe:
                continue
            mine, mine_typed = class_facts(next((c for c in d.values if not c.facts), d.values[0]))
            # a key set by two dimensions would make the order of replacement matter
            assert not values.keys() & mine.keys(), f"dimension `{d.name}` sets a key another sets"
            values.update(mine)
            typed.update(mine_typed)
            default_keys[d.name] = tuple(mine)
            if d.name != "model.is_moe":
                cells *= d.size
        possible = possible_values(domain, {}, replace(policy, implications=()))
        return cls(values, typed, default_keys, possible, cells)


def class_facts(v: ValueClass) -> tuple[dict[str, Any], dict[str, Any]]:
    """The facts class *v* gives its representative, checked against the vocabulary (unknown
    ones left out), and as conditions compare them; computed once per class."""
    return _CLASS_FACTS(v)


def _class_facts(v: ValueClass) -> tuple[dict[str, Any], dict[str, Any]]:
    values = {k: normalise_value(k, x) for k, x in v.facts.items() if x is not None}
    return values, {k: typed_value(k, x) for k, x in values.items()}


_CLASS_FACTS: Final[IdMemo[ValueClass, tuple[dict[str, Any], dict[str, Any]]]] = IdMemo(_class_facts)


class _Usage:
    """Which of a candidate's rules reject it over a group (``fires``), as the only reason
    (``sole``) or the gravest one (``first``), where it runs at all: read by :data:`_USAGE`,
    memoised on the values of the keys its catalog requirement and its rules read."""

    def __init__(self, policy: Policy, path: str, backend: str) -> None:
        self.requires = policy.backends[path][backend].requires
        self.rules = policy.rules_for(backend, path)
        tests = [*tests_of(self.requires), *(t for r in self.rules for t in rule_tests(r))]
        self.keys = tuple(sorted({t.key for t in tests}))

    def __call__(self, possible: Mapping[str, frozenset[Any]]) -> tuple[frozenset[str], ...]:
        fires: set[str] = set()
        sole: set[str] = set()
        first: set[str] = set()
        runs = True in _met(self.requires, possible)
        effects = {r.id: rule_effect(r, possible) for r in self.rules}
        for r in self.rules:
            if True not in effects[r.id]:
                continue
            fires.add(r.id)
            if not runs:
                continue
            if all(False in effects[t.id] for t in self.rules if t.id != r.id):
                sole.add(r.id)
            graver = (t for t in self.rules if gravity(t.severity) < gravity(r.severity))
            if all(False in effects[t.id] for t in graver):
                first.add(r.id)
        return frozenset(fires), frozenset(sole), frozenset(first)


_USAGE: Final[KeyMemo[_Usage, tuple[frozenset[str], ...]]] = KeyMemo(lambda u: u.keys, lambda u, p: u(p))


def _state(r: Rule, typed: Mapping[str, Any]) -> bool | None:
    until = evaluate(r.until, typed) if r.until is not None else None
    return rule_state(evaluate(r.when, typed), until)


# --------------------------------------------------------------------------- invariants


def _check(path: str, group: Group, d: Decision, policy: Policy) -> Iterator[Violation]:
    pd = d.paths[path]
    if not pd.applicable:
        return
    typed = d.facts.typed()
    if pd.backend is None:
        why = "; ".join(
            f"`{c.backend}`: {c.rules[0] if c.rules else c.reason}" for c in pd.candidates if c.verdict != "viable"
        )
        yield Violation("no-backend", path, group, f"path `{path}` has no valid backend ({why})")
    else:
        b = pd.backend
        cand = next(c for c in pd.candidates if c.backend == b)
        overridden = set(cand.overridden)
        for r in policy.rules_for(b, path):
            w = _state(r, typed)
            if r.kind == "deny" and applies(r.kind, r.severity, w):
                if r.id in overridden and pd.explicit:
                    continue
                yield Violation(
                    "denied-chosen",
                    path,
                    group,
                    f"path `{path}` chooses `{b}`, which rule `{r.id}` denies",
                    (r.id,),
                )
            elif r.kind == "require" and applies(r.kind, r.severity, w) and not met(evaluate(r.require, typed)):
                if r.id in overridden:
                    continue
                yield Violation(
                    "unmet-requirement",
                    path,
                    group,
                    f"path `{path}` chooses `{b}` although rule `{r.id}` requires what these facts lack",
                    (r.id,),
                )
        entry = policy.backends[path][b]
        if not met(evaluate(entry.requires, typed)) and entry.rule_id not in overridden:
            yield Violation(
                "unmet-requirement",
                path,
                group,
                f"path `{path}` chooses `{b}` although its catalog requirement is not met",
                (entry.rule_id,),
            )
    yield from _warmup_violations(path, group, d, policy)


def _warmup_violations(path: str, group: Group, d: Decision, policy: Policy) -> Iterator[Violation]:
    """Warmup warms only kernels of backends this path chose, and each such kernel unless denied."""
    pd = d.paths[path]
    mine = {k for k in d.warmup if k.endswith(f".{path}")}
    for k in sorted(mine):
        if k != f"{pd.backend}.{path}":
            yield Violation("warmup", path, group, f"warmup warms `{k}`, but path `{path}` runs `{pd.backend}`")
    ran = pd.backend
    if ran is not None and policy.backends[path][ran].warmup and f"{ran}.{path}" not in mine:
        denied = [
            r
            for r in policy.rules_for(ran, "warmup")
            if r.paths and "warmup" in r.paths and applies(r.kind, r.severity, _state(r, d.facts.typed()))
        ]
        if not denied:
            yield Violation(
                "warmup", path, group, f"path `{path}` runs JIT backend `{ran}` but warmup does not warm `{ran}.{path}`"
            )


#: the walker a forked worker inherits (set only while a pool runs)
_WORKER: dict[str, _Walker] = {}
#: the splits from a task's root down to the parts a pool hands its workers (see :meth:`_Walker.plan`)
PLAN_DEPTH: Final = 6

_Walked = tuple[list[PathGroup], int, int]  #: groups, resolves, groups left out


def _run_here(walker: _Walker, task: _Task, route: tuple[int, ...] = ()) -> _Walked:
    before, skipped = walker.resolves, walker.skipped
    out = walker.walk_task(task, route)
    return out, walker.resolves - before, walker.skipped - skipped


def _run_indexed(item: tuple[int, tuple[_Task, tuple[int, ...]]]) -> tuple[int, _Walked]:
    groups, resolves, skipped = _run_here(_WORKER["walker"], *item[1])
    return item[0], (_shared(groups), resolves, skipped)


def _shared(groups: list[PathGroup]) -> list[PathGroup]:
    """*groups* with equal candidate lists made one object, before they are pickled back to
    the parent: a part's groups hold few distinct lists (the MoE walk of sm90: 1,206 among
    14,372 groups, 116 distinct candidates among 80,209), and pickle writes an object it has
    written once as a reference, so the parent reads each list once (24 MB and 2.4 s of
    unpickling for those groups before, the parent's main cost on many workers)."""
    lists: dict[tuple[Candidate, ...], tuple[Candidate, ...]] = {}
    each: dict[Candidate, Candidate] = {}
    out = []
    for pg in groups:
        cands = lists.get(pg.candidates)
        if cands is None:
            cands = lists[pg.candidates] = tuple(each.setdefault(c, c) for c in pg.candidates)
        out.append(replace(pg, candidates=cands))
    return out


def verify(
    policy: Policy,
    domain: Domain | None = None,
    *,
    explicit: bool = False,
    jobs: int | None = None,
    closed: bool = True,
    scope: Delta | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Coverage:
    """Resolve every group of cells of *policy*'s domain and check the invariants.

    :param jobs: worker processes (default: one per CPU where ``fork`` is available; 1 runs
        everything in this process).
    :param closed: walk only the states implications complete (see the module docstring);
        ``False`` walks the inputs as given, implications applied by the resolver, so a
        change to an implication shows in the decisions (what ``diff`` needs).
    :param scope: walk only the cells where one of these items may take effect (see
        :mod:`.scope`); the others are left out and counted in :attr:`Coverage.skipped`.
    :param progress: called with (tasks done, tasks) as the walk's parts finish.
    """
    start = time.perf_counter()
    domain = domain or build_domain(policy, explicit=explicit)
    # Every fact state after implications is a state no implication changes, so resolving
    # each state of the domain without implications covers every input (see the docstring).
    if closed:
        core = replace(policy, implications=(), digest=policy.digest + "+closed")
        walker = _Walker(core, domain, original=policy, scope=scope)
    else:
        walker = _Walker(policy, domain, scope=scope)
    tasks = walker.tasks()
    if jobs is None:
        jobs = os.cpu_count() or 1
    jobs = max(1, jobs)  # more workers than tasks still help: tasks are cut into parts (:func:`_pooled`)
    parts: list[_Walked]
    ctx = None
    if jobs > 1:
        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:
            ctx = None
    report = progress or (lambda done, total: None)
    with collector_paused():
        if ctx is None:
            report(0, len(tasks))
            parts = []
            for i, t in enumerate(tasks):
                parts.append(_run_here(walker, t))
                report(i + 1, len(tasks))
        else:
            parts = _pooled(walker, tasks, ctx, jobs, report)
    cov = Coverage(domain, domain.size)
    for groups_, n, skipped in parts:
        cov.resolves += n
        cov.skipped += skipped
        for pg in groups_:
            cov.groups[pg.path] = cov.groups.get(pg.path, 0) + 1
            cov.violations.extend(pg.violations)
            cov.results.append(pg)
    cov.seconds = time.perf_counter() - start
    return cov


def _pooled(
    walker: _Walker, tasks: list[_Task], ctx: Any, jobs: int, report: Callable[[int, int], None]
) -> list[_Walked]:
    """Each task's walk, over *jobs* forked workers. A task is cut into the parts its first
    splits make (:meth:`_Walker.plan`: one task, the MoE walk of one GPU, holds most of the
    groups, and whole tasks would leave all but one worker idle), the parts are walked in any
    order and put back in their places: the groups, and their order, are those of a walk on
    one process."""
    plans: list[tuple[list[PathGroup | _Part], int, int]] = []
    for t in tasks:  # each plan's resolves and groups left out (those above its parts)
        before, left = walker.resolves, walker.skipped
        plans.append((walker.plan(t, PLAN_DEPTH), walker.resolves - before, walker.skipped - left))
    work = [(ti, x.route) for ti, (items, _, _) in enumerate(plans) for x in items if isinstance(x, _Part)]
    report(0, len(work))
    found: dict[int, _Walked] = {}
    if work:  # (a small table may settle every group above the parts)
        _WORKER["walker"] = walker
        try:
            with ctx.Pool(min(jobs, len(work)), initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
                # the MoE walks take longest: start them first
                order = sorted(range(len(work)), key=lambda k: tasks[work[k][0]][0] != "moe")
                items = [(k, (tasks[work[k][0]], work[k][1])) for k in order]
                for k, part in pool.imap_unordered(_run_indexed, items, chunksize=1):
                    found[k] = part
                    report(len(found), len(work))
        finally:
            _WORKER.clear()
    at = {w: k for k, w in enumerate(work)}
    out: list[_Walked] = []
    for ti, (items_, planned, left_out) in enumerate(plans):
        groups: list[PathGroup] = []
        resolves, skipped = planned, left_out
        for x in items_:
            if isinstance(x, PathGroup):
                groups.append(x)
                continue
            walked, n, left = found[at[(ti, x.route)]]
            groups += walked
            resolves, skipped = resolves + n, skipped + left
        out.append((groups, resolves, skipped))
    return out
