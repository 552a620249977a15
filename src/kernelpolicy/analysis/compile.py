"""The rule tables compiled into decision diagrams: every path's decision, for every cell at once.

One :class:`Compiled` holds one :class:`~.mdd.Manager` whose levels are the domain's dimensions
(``gpu.sm`` first, then ``model.is_moe``, then :func:`~.domain.build_domain`'s order) and whose
classes are the dimensions' value classes. Over it:

- each condition is a three-valued diagram (true, false, undecided where a fact it reads is
  unknown), exact cell by cell: ``not``, ``all`` and ``any`` are Kleene's operations on the
  diagrams, so no two keys are taken as independent;
- each rule's state, applicability and effect (:mod:`kernelpolicy.semantics`), each candidate's
  rejection, each path's order (``order`` entries, then ``prefer`` rules), its explicit pick
  (``use`` rules, the deployment's own settings and denies, one pick per layer) and its
  ``refuse`` entries are diagrams built from those;
- a path's *outcome* (:class:`Outcome`) is the first candidate of the cell's order that nothing
  rejects, as :class:`kernelpolicy.resolver` judges them, or why there is none.

The terminal decisions are made by the functions the resolver calls (:func:`~kernelpolicy.semantics.one_pick`,
:func:`~kernelpolicy.semantics.pick_outcome`, :func:`~kernelpolicy.semantics.preferred`); the
diagrams only decide which of them each cell reaches. ``check`` then resolves a witness cell of
every distinct outcome with the real resolver and requires the same answer (:mod:`.coverage`).

A dense model's cells have no MoE-only facts: tests on those keys read *unknown* there, and
:meth:`Compiled.count` counts those levels once for them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Final, NamedTuple

from ..dsl.conditions import All, Any_, Condition, Not, Test, tests_of
from ..facts.keys import DECIDED_PATHS
from ..policy import Implication, Policy, Rule
from ..semantics import FACT_PICKS, OVERRIDABLE, Pick, one_pick, preferred
from .domain import Dimension, Domain, Group, ValueClass, class_facts, merge
from .mdd import DEFAULT_BUDGET, Manager

__all__ = ["ABSENT", "PICKS", "Compiled", "Outcome", "is_contradiction"]

#: Explicit choices of a deployment, read as facts: (fact key, path, flag).
_FACT_PICKS: Final = FACT_PICKS


class Outcome(NamedTuple):
    """What one path decides in a cell (a diagram's terminal).

    ``kind``: ``chosen`` (``backend`` runs), ``none`` (every candidate is rejected), ``refused``
    (an ``unsupported`` entry that decides holds: ``rule``), ``contradiction`` (explicit choices
    contradict: ``sources``), ``absent`` (a dense model has no MoE path).
    """

    kind: str
    backend: str | None = None
    #: the candidates judged before the chosen one (for ``none`` and ``refused``: all of them),
    #: the explicit pick left out
    judged: tuple[str, ...] = ()
    explicit: str | None = None  #: where the path's explicit choice came from
    #: the ``unsupported`` entry that refuses the path; for a contradiction, its kind
    #: (:data:`PICKS`, ``not-a-backend``, ``denied``)
    rule: str | None = None
    sources: tuple[str, ...] = ()  #: the explicit choices that contradict

    @property
    def decided(self) -> bool:
        return self.kind in ("chosen", "none", "refused")


def is_contradiction(o: Any) -> bool:
    """Whether a terminal is an :class:`Outcome` of explicit choices that contradict (the
    resolver then refuses the whole input)."""
    return isinstance(o, Outcome) and o.kind == "contradiction"


ABSENT: Final = Outcome("absent")
#: a cell :meth:`Compiled.outcome` takes from the base as it is (see :mod:`.layered`)
_KEPT: Final = "<kept>"
#: the ``rule`` of a contradiction between explicit choices of one layer (read before anything
#: else of any path: a dense model's MoE path refuses the deployment for it too)
PICKS: Final = "<picks>"


class Compiled:
    """A policy's decisions over its domain as diagrams, built on first use and kept.

    :param policy: the policy decided (for the proof of completed states: without implications).
    :param original: the policy whose implications say which cells are completed states
        (:meth:`closed`); ``None``: every cell is one.
    """

    def __init__(
        self,
        policy: Policy,
        domain: Domain,
        original: Policy | None = None,
        budget: int = DEFAULT_BUDGET,
        manager: Manager | None = None,
    ) -> None:
        self.policy = policy
        self.domain = domain
        self.original = original
        self.dims: tuple[Dimension, ...] = domain.dims
        sizes = [len(d.values) for d in self.dims]
        if manager is not None and list(manager.sizes) != sizes:
            raise ValueError("the manager's levels are not this domain's")
        #: the diagrams' nodes (two policies compiled in one manager share them: :mod:`.diffing`)
        self.m = manager or Manager(sizes, [[v.weight for v in d.values] for d in self.dims], budget)
        self.level_of = {d.name: i for i, d in enumerate(self.dims)}
        self.key_level = {k: i for i, d in enumerate(self.dims) for k in d.keys}
        self.moe_level = self.level_of["model.is_moe"]
        is_moe = self.dims[self.moe_level]
        self.moe_index = next(i for i, v in enumerate(is_moe.values) if v.facts.get("model.is_moe"))
        self.dense_index = next(i for i, v in enumerate(is_moe.values) if not v.facts.get("model.is_moe"))
        self.moe_only = frozenset(i for i, d in enumerate(self.dims) if d.moe_only)
        self.typed = [[class_facts(v)[1] for v in d.values] for d in self.dims]
        #: per level, the class a representative takes where a cell leaves it open: *unknown*, else the first
        self.default = {i: next((j for j, v in enumerate(d.values) if not v.facts), 0) for i, d in enumerate(self.dims)}
        m = self.m
        self.T, self.F, self.U = m.true, m.false, m.term(None)
        self.moe = m.var(self.moe_level, [i == self.moe_index for i in range(len(is_moe.values))])
        self._conds: dict[int, tuple[Condition, int]] = {}
        self._states: dict[str, int] = {}
        self._effects: dict[tuple[str, int], int] = {}
        self._outcomes: dict[str, int] = {}
        self._rejected: dict[tuple[str, str], int] = {}
        self.last_by_id = {r.id: r for r in policy.rules}
        #: the shipped tables' outcomes and where a layer above them can change one
        #: (:mod:`.layered`); ``None``: every cell is decided here
        self.base: dict[str, int] | None = None
        self._layered: dict[str, int] = {}
        self._above: frozenset[int] | None = None

    def layer_on(self, base: Mapping[str, int], region: Mapping[str, int], above: Sequence[Rule]) -> None:
        """Decide only the cells of each path's *region* (boolean) again; elsewhere its outcome
        is *base*'s (the outcomes of the files below the layer, made in this manager:
        :mod:`.layered`). *above*: the layer's rules, the only ones whose usage is read."""
        self.base = dict(base)
        self._layered = dict(region)
        self._above = frozenset(id(r) for r in above)
        self._outcomes.clear()

    def layered(self, path: str) -> int:
        """Boolean: the cells where *path* is decided here (on a base: where the layer reaches it)."""
        return self._layered.get(path, self.F) if self.base is not None else self.T

    def reads_usage(self, r: Rule) -> bool:
        """Whether the proof reads *r*'s usage (on a base: only a rule of the layer above it)."""
        return self._above is None or id(r) in self._above

    # -- conditions

    def test(self, t: Test) -> int:
        """A test as a three-valued diagram."""
        lv = self.key_level.get(t.key)
        if lv is None:
            return self.U  # a key no dimension holds is unknown in every cell
        values = [None if (v := ty.get(t.key)) is None else bool(t.match(v)) for ty in self.typed[lv]]
        n = self.m.var(lv, values)
        if lv in self.moe_only:  # a dense model does not have the fact
            n = self._by_kind(n, self.U)
        return n

    def _by_kind(self, moe: int, dense: int) -> int:
        """*moe* for a MoE model's cells, *dense* for a dense model's."""
        return self.m.ite(self.moe, moe, dense)

    def cond(self, c: Condition) -> int:
        """A condition as a three-valued diagram (Kleene logic, exact per cell)."""
        hit = self._conds.get(id(c))
        if hit is not None and hit[0] is c:
            return hit[1]
        m = self.m
        if isinstance(c, Test):
            n = self.test(c)
        elif isinstance(c, Not):
            n = m.apply1("not3", _not3, self.cond(c.child))
        elif isinstance(c, All):
            n = self.T
            for child in c.children:
                n = m.apply2("and3", _and3, n, self.cond(child), self._and_short)
        elif isinstance(c, Any_):
            n = self.F
            for child in c.children:
                n = m.apply2("or3", _or3, n, self.cond(child), self._or_short)
        else:  # pragma: no cover - the four kinds are every condition
            raise TypeError(f"not a condition: {c!r}")
        self._conds[id(c)] = (c, n)
        return n

    def _and_short(self, a: int, b: int) -> int | None:
        if self.F in (a, b):
            return self.F
        if a == self.T:
            return b
        if b == self.T:
            return a
        return None

    def _or_short(self, a: int, b: int) -> int | None:
        if self.T in (a, b):
            return self.T
        if a == self.F:
            return b
        if b == self.F:
            return a
        return None

    def holds(self, c: Condition) -> int:
        """Boolean: where *c* is true."""
        return self.m.eq(self.cond(c), True)

    def fails(self, c: Condition) -> int:
        """Boolean: where *c* is false (a requirement that is not met: unknown counts as met)."""
        return self.m.eq(self.cond(c), False)

    # -- rules

    def state(self, rule_id: str) -> int:
        """A rule's ``when`` after retirement (three-valued; the last rule of an id wins, as in the resolver)."""
        n = self._states.get(rule_id)
        if n is None:
            r = self.last_by_id[rule_id]
            n = self.cond(r.when)
            if r.until is not None:
                n = self.m.apply2("retire", _retire, n, self.cond(r.until))
            self._states[rule_id] = n
        return n

    def active(self, rule_id: str) -> int:
        """Boolean: where a ``use``/``prefer`` rule (or a user setting) is in force (its state is true)."""
        return self.m.eq(self.state(rule_id), True)

    def effect(self, r: Rule) -> int:
        """Boolean: where *r* rejects its backend (:func:`~kernelpolicy.semantics.takes_effect`)."""
        key = (r.id, id(r))
        n = self._effects.get(key)
        if n is None:
            crashy = r.severity == "crash" and r.kind in ("deny", "require")
            applies = self.m.apply1(("applies", crashy), _applies(crashy), self.state(r.id))
            n = applies if r.kind == "deny" else self.m.AND(applies, self.fails(r.require))
            self._effects[key] = n
        return n

    def runs(self, path: str, backend: str) -> int:
        """Boolean: where *backend*'s catalog requirement on *path* is met (unknown: assumed met)."""
        return self.m.NOT(self.fails(self.policy.backends[path][backend].requires))

    def rejected(self, path: str, backend: str) -> int:
        """Boolean: where the resolver rejects *backend* as a candidate it was not asked for."""
        key = (path, backend)
        n = self._rejected.get(key)
        if n is None:
            entry = self.policy.backends[path][backend]
            if not entry.auto:
                n = self.T
            else:
                n = self.m.any_of(
                    [self.fails(entry.requires), *(self.effect(r) for r in self.policy.rules_for(backend, path))]
                )
            self._rejected[key] = n
        return n

    # -- a path's order and explicit pick

    def order(self, path: str) -> int:
        """The path's candidate order per cell (terminals: tuples of backend ids)."""
        m, policy = self.m, self.policy
        catalog = tuple(policy.backends[path])
        entries = [o for layer in ("policy", "shipped") for o in policy.orders.get(path, ()) if o.origin.layer == layer]
        n = m.term(catalog)
        for o in reversed(entries):
            seq = tuple(o.backends) + tuple(b for b in catalog if b not in o.backends)
            n = m.ite(self.holds(o.when), m.term(seq), n)
        for r in _prefers(policy, path):
            n = m.ite(self.active(r.id), m.apply1(("prefer", r.backends), _front(r.backends), n), n)
        return n

    def picks(self, path: str) -> int:
        """The explicit choices for *path* per cell, in the resolver's order (terminals: tuples of :class:`Pick`)."""
        m, policy = self.m, self.policy
        options: list[tuple[int, Pick]] = []
        for key, p, flag in _FACT_PICKS:
            lv = self.key_level.get(key)
            if p != path or lv is None:
                continue
            for i, v in enumerate(self.dims[lv].values):
                b = v.facts.get(key)
                if b is None:
                    continue
                here = m.var(lv, [j == i for j in range(m.sizes[lv])])
                if lv in self.moe_only:
                    here = m.AND(here, self.moe)
                options.append((here, Pick(str(b), f"{flag} {b}", (), "user")))
        for r in policy.rules:
            if r.kind != "use":
                continue
            paths = r.paths or [q for q in DECIDED_PATHS if r.backends[0] in policy.backends.get(q, {})]
            if path not in paths:
                continue
            here = self.active(r.id)
            for d in policy.rules_for(r.backends[0], path):
                if d.kind == "deny" and d.layer == "user":  # the deployment's own setting wins
                    here = m.AND(here, m.NOT(self.active(d.id)))
            source = r.id if r.layer == "policy" else r.id.split(".env.", 1)[-1]
            options.append((here, Pick(r.backends[0], source, r.overrides, r.layer)))
        n = m.term(())
        for here, pick in options:
            n = m.ite(here, m.apply1(("pick", pick), _append(pick), n), n)
        return n

    def pick_judge(self, path: str, pick: Pick) -> int:
        """What becomes of an explicit choice of a catalog backend (terminals: ``chosen``,
        ``refused`` or the id of the user's setting that denies it: a contradiction)."""
        m, policy = self.m, self.policy
        entry = policy.backends[path][pick.backend]
        parts = [("catalog", entry.rule_id, self.fails(entry.requires))]
        parts += [(r.severity, r.id, self.effect(r)) for r in policy.rules_for(pick.backend, path)]
        blocked = m.any_of([x for sev, rid, x in parts if not (sev in OVERRIDABLE or rid in pick.overrides)])
        n = m.ite(blocked, m.term("refused"), m.term("chosen"))
        for sev, rid, x in reversed(parts):
            if sev == "user":  # the first setting of the deployment's that denies it
                n = m.ite(x, m.term(("denied", rid)), n)
        return n

    # -- a path's outcome

    def outcome(self, path: str) -> int:
        """The path's :class:`Outcome` in every cell, as the resolver decides it."""
        n = self._outcomes.get(path)
        if n is not None:
            return n
        m = self.m
        self.m.what = f"path `{path}`"
        picks, order = self.picks(path), self.order(path)
        both = m.apply2("pair", lambda a, b: (a, b), picks, order)
        refusals = [u for u in self.policy.unsupported if u.refuse and path in u.paths]
        n = m.term(ABSENT)
        if self.base is not None:  # a layer on the shipped tables: decided again where it reaches
            n = self.base[path]
            both = m.ite(self.layered(path), both, m.term(_KEPT))
        reach = m.reach(both)  # each pair's cells read only the nodes that reach it
        decided: dict[Hashable, int] = {_KEPT: n}
        for pair in sorted(reach[both] - {_KEPT}, key=repr):
            here = m.among(both, frozenset((pair,)), reach)
            decided[pair] = self._decide(path, pair[0], pair[1], refusals, here)
        n = m.switch(both, decided, reach)  # each pair's outcome where the cell holds that pair
        if path in ("moe", "router"):  # a dense model has no MoE path (its picks are still read)
            absent = m.apply1("absent", lambda o: o if o.rule == PICKS else ABSENT, n)
            n = m.ite(self.moe, n, absent)
        if not self.policy.backends.get(path):  # no catalog for the path (attention, issue #39): as the resolver
            n = m.apply1("absent", lambda o: o if o.rule == PICKS else ABSENT, n)
        self._outcomes[path] = n
        self.m.what = ""
        return n

    def _decide(
        self, path: str, options: tuple[Pick, ...], order: tuple[str, ...], refusals: Sequence[Any], care: int
    ) -> int:
        """The outcome where the cell's explicit choices are *options* and its order *order*
        (*care*: those cells), as the resolver judges it: a contradiction between choices, a
        choice of no backend of the path, a refusal, the explicit choice judged, then each
        candidate in order."""
        m = self.m
        pick = one_pick(options)
        if isinstance(pick, tuple):  # picks of one layer contradict
            return m.term(Outcome("contradiction", rule=PICKS, sources=tuple(o.source for o in pick)))
        if pick is not None and pick.backend not in self.policy.backends[path]:
            return m.term(Outcome("contradiction", rule="not-a-backend", sources=(pick.source,)))
        source = pick.source if pick is not None else None
        rest = tuple(b for b in order if pick is None or b != pick.backend)
        refused = m.term(None)
        for u in reversed(refusals):  # the first entry that holds decides
            refused = m.ite(self.holds(u.when), m.term(u.id), refused)
        judges = [refused]
        if pick is not None:
            judges.append(self.pick_judge(path, pick))
        judges += [self.rejected(path, b) for b in rest]
        first = 1 + (pick is not None)

        def decide(i: int, v: Any) -> Outcome | None:
            if i == 0:
                return None if v is None else Outcome("refused", None, rest, source, v)
            if i < first:  # the explicit choice: chosen, refused (go on) or denied by a setting of the deployment
                assert pick is not None
                if v == "chosen":
                    return Outcome("chosen", pick.backend, (), source)
                return None if v == "refused" else Outcome("contradiction", rule="denied", sources=(pick.source, v[1]))
            b = rest[i - first]
            return None if v else Outcome("chosen", b, rest[: i - first], source)

        return m.first(care, judges, decide, Outcome("none", None, rest, source))

    # -- completed states

    def closed(self) -> int:
        """Boolean: the cells no implication of the original policy changes (it would set a
        dimension's key the cell leaves unknown): the states the resolver decides from."""
        m = self.m
        out = self.T
        if self.original is None:
            return out
        for imp in self.original.implications:
            unknown = m.any_of([self._unknown(k) for k in imp.sets if k in self.key_level])
            if unknown == self.F:
                continue
            out = m.AND(out, m.NOT(m.AND(self.fires(imp), unknown)))
        return out

    def fires(self, imp: Implication) -> int:
        """Boolean: where an implication fires on a cell as it is (its ``when`` holds, its ``unless`` does not)."""
        n = self.holds(imp.when)
        if imp.unless is not None:
            n = self.m.AND(n, self.m.NOT(self.holds(imp.unless)))
        return n

    def _unknown(self, key: str) -> int:
        lv = self.key_level[key]
        n = self.m.var(lv, [ty.get(key) is None for ty in self.typed[lv]])
        return self._by_kind(n, self.T) if lv in self.moe_only else n

    # -- implications, symbolically

    def closure(self, implications: Sequence[Implication]) -> dict[int, int]:
        """The resolver's implication fixpoint (:func:`~kernelpolicy.semantics.imply`) over every
        cell at once: for each level an implication sets, a diagram of the class the cell holds
        once the implications are applied (see :meth:`fixpoint`)."""
        return self.fixpoint(implications)[0]

    def fixpoint(self, implications: Sequence[Implication]) -> tuple[dict[int, int], dict[str, int]]:
        """The implication fixpoint over every cell: implications applied in order, pass after
        pass, each setting only facts the cell (as set so far) leaves unknown, until a pass sets
        nothing. Returns, per level set, the diagram of the class the cell then holds, and per
        key set, the diagram of the index of the implication that set it (``-1``: none did).

        A dense model's MoE-only facts are left out of its cells: implications do not set them
        there (their tests read *unknown* for a dense model, see :meth:`test`)."""
        m = self.m
        now: dict[int, int] = {}
        setter: dict[str, int] = {}
        for _ in range(len(implications) + 1):
            changed = False
            for i, imp in enumerate(implications):
                fires = self.compose(self.fires(imp), now)
                if fires == self.F:
                    continue
                for k, v in imp.sets.items():
                    by = setter.get(k, m.term(-1))
                    lv = self.key_level.get(k)
                    if lv is None:  # a key no condition reads: unknown until an implication sets it
                        unknown = m.eq(by, -1)
                    else:
                        held = now.get(lv, self.identity(lv))
                        unknown = m.apply1(("unknown", lv, k), partial(_unknown_class, self.typed[lv], k), held)
                        if lv in self.moe_only:
                            unknown = m.AND(unknown, self.moe)
                    sets = m.AND(fires, unknown)
                    if sets == self.F:
                        continue
                    new = m.ite(sets, m.term(i), by)
                    if new == by:
                        continue
                    setter[k] = new
                    target = self.class_of(lv, k, v) if lv is not None else None
                    if lv is not None and target is not None:
                        now[lv] = m.ite(sets, m.term(target), now.get(lv, self.identity(lv)))
                    changed = True
            if not changed:
                break
        return now, setter

    def identity(self, lv: int) -> int:
        """The diagram of a level's class index."""
        return self.m.var(lv, list(range(self.m.sizes[lv])))

    def class_of(self, lv: int, key: str, value: Any) -> int | None:
        """The class of level *lv* that holds *value* of *key* (``None``: none does): the one every
        test of the domain's conditions on *key* answers for as it answers for *value*."""
        from ..facts.record import normalise_value, typed_value  # noqa: PLC0415

        typed = typed_value(key, normalise_value(key, value))
        tests = self.domain.tests_by_key.get(key, [])
        want = tuple(bool(t.match(typed)) for t in tests)
        for i, ty in enumerate(self.typed[lv]):
            v = ty.get(key)
            if v is not None and tuple(bool(t.match(v)) for t in tests) == want:
                return i
        return None

    def compose(self, n: int, now: Mapping[int, int]) -> int:
        """*n* read at the cell the levels in *now* (level -> diagram of a class index) make of each cell."""
        if not now:
            return n
        key = tuple(sorted(now.items()))
        memo = self.m.memos.setdefault(("compose", key), {})
        m = self.m

        def go(x: int) -> int:
            hit = memo.get(x)
            if hit is not None:
                return hit
            if m.is_term(x):
                out = x
            else:
                lv = m.level(x)
                kids = [go(k) for k in m.kids(x)]
                sel = now.get(lv)
                if sel is None and all(m.level(k) > lv for k in kids):
                    out = m.node(lv, kids)
                else:
                    out = m.select(self.identity(lv) if sel is None else sel, kids)
            memo[x] = out
            return out

        return go(n)

    # -- reading cells

    def kinds(self, path: str) -> tuple[int, ...]:
        """The model kinds (classes of ``model.is_moe``) *path* is decided for."""
        return (self.moe_index,) if path in ("moe", "router") else (self.moe_index, self.dense_index)

    def fixed_for(self, kind: int) -> dict[int, int]:
        """The levels a model kind holds one class of: ``model.is_moe``, and for a dense model
        every MoE-only dimension (its facts are unknown)."""
        out = {self.moe_level: kind}
        if kind == self.dense_index:
            out.update({lv: self.default[lv] for lv in self.moe_only})
        return out

    def count(self, n: int, path: str) -> dict[Any, int]:
        """The cells of each terminal value of *n* over the model kinds *path* is decided for."""
        total: dict[Any, int] = {}
        for kind in self.kinds(path):
            for v, c in self.m.count_by(n, self.fixed_for(kind)).items():
                total[v] = total.get(v, 0) + c
        return total

    def cells(self, lits: Sequence[int], path: str) -> int:
        """The cells of *path*'s kinds where every literal of *lits* holds (see
        :meth:`~.mdd.Manager.meets`; one boolean diagram: its true cells)."""
        m = self.m
        if len(lits) == 1 and lits[0] >= 0:
            return sum(m.count(lits[0], self.fixed_for(kind)) for kind in self.kinds(path))
        return sum(m.count_all(lits, self.fixed_for(kind)) for kind in self.kinds(path))

    def witness(
        self, n: int, pred: Callable[[Any], bool], path: str, reach: Mapping[int, frozenset[Any]] | None = None
    ) -> dict[int, int] | None:
        """A cell of *path*'s kinds where *n*'s terminal satisfies *pred*: open dimensions take
        their *unknown* class (else their first), as the walk's representatives did. *reach*:
        :meth:`~.mdd.Manager.reach` of :meth:`by_kind` of *n*, for many questions about one diagram."""
        region = self.by_kind(n, path)
        return self.m.witness(region, lambda v: v is not _NOWHERE and pred(v), self.default, reach)

    def values(self, n: int, path: str) -> set[Any]:
        """The terminal values *n* takes in the cells of *path*'s kinds."""
        return self.m.terminals(self.by_kind(n, path)) - {_NOWHERE}

    def by_kind(self, n: int, path: str) -> int:
        """*n* over the model kinds *path* is decided for; elsewhere a terminal no question matches."""
        kinds = self.kinds(path)
        if len(kinds) == 2:
            return n
        return self.m.ite(self._kind(kinds[0]), n, self.m.term(_NOWHERE))

    def _kind(self, kind: int) -> int:
        return self.moe if kind == self.moe_index else self.m.NOT(self.moe)

    def facts(self, cell: Mapping[int, int]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A cell's facts (raw and typed), as the resolver is given them: a dense model has no
        MoE-only facts; a MoE model's experts are quantised as the rest unless a class says otherwise."""
        moe = cell[self.moe_level] == self.moe_index
        raw: dict[str, Any] = {}
        typed: dict[str, Any] = {}
        for lv, d in enumerate(self.dims):
            if lv in self.moe_only and not moe:
                continue
            mine, mine_typed = class_facts(d.values[cell[lv]])
            raw.update(mine)
            typed.update(mine_typed)
        if moe and "quant.moe_scheme" not in raw and "quant.scheme" in raw:
            raw["quant.moe_scheme"], typed["quant.moe_scheme"] = raw["quant.scheme"], typed["quant.scheme"]
        return raw, typed

    def group(self, box: Mapping[int, tuple[int, ...]], cells: int, kind: int) -> Group:
        """A box of :meth:`~.mdd.Manager.cubes` as a :class:`~.domain.Group`: the classes it
        fixes (merged where it holds several), its model kind, *cells*, and a representative."""
        fixed: dict[str, ValueClass] = {"model.is_moe": self.dims[self.moe_level].values[kind]}
        cell = {**self.default, **self.fixed_for(kind)}
        for lv, idx in sorted(box.items()):
            d = self.dims[lv]
            if lv == self.moe_level or (lv in self.moe_only and kind == self.dense_index):
                continue
            if len(idx) < len(d.values):
                fixed[d.name] = merge([d.values[i] for i in idx])
            cell[lv] = idx[0] if self.default[lv] not in idx else self.default[lv]
        return Group(fixed, cells, self.facts(cell)[0])

    def boxes(
        self, n: int, pred: Callable[[Any], bool], path: str, limit: int | None = None
    ) -> list[tuple[Group, Any]]:
        """Disjoint groups of cells of *path*'s kinds covering where *n*'s terminal satisfies
        *pred*, each with its terminal value and exact cell count."""
        return [(self.group(box, cells, kind), value) for box, cells, kind, value in self._cubes(n, pred, path, limit)]

    def labelled(
        self, n: int, pred: Callable[[Any], bool], path: str, limit: int | None = None, *, largest: bool = False
    ) -> list[tuple[tuple[tuple[str, str], ...], int, Any]]:
        """:meth:`boxes` as the classes each fixes, ``(dimension, label)`` in level order (the
        model kind left out), with its cell count and terminal value: no representative cell
        is made (``diff`` lists thousands). *largest*: the largest *limit* boxes of each kind
        (:meth:`~.mdd.Manager.largest_cubes`), not the first met."""
        out = []
        said: dict[tuple[int, tuple[int, ...]], tuple[str, str]] = {}
        for box, cells, kind, value in self._cubes(n, pred, path, limit, largest=largest):
            pairs = []
            for lv, idx in sorted(box.items()):
                if lv == self.moe_level or (lv in self.moe_only and kind == self.dense_index):
                    continue
                if len(idx) == len(self.dims[lv].values):
                    continue
                pair = said.get((lv, idx))
                if pair is None:
                    pair = said[lv, idx] = (self.dims[lv].name, "|".join(self.dims[lv].values[i].label for i in idx))
                pairs.append(pair)
            out.append((tuple(pairs), cells, value))
        return out

    def count_boxes(self, n: int, pred: Callable[[Any], bool], path: str) -> int:
        """How many boxes :meth:`labelled` (and :meth:`boxes`) make of *n* without a limit."""
        return sum(
            self.m.count_cubes(self.m.ite(self._kind(kind), n, self.m.term(_NOWHERE)), partial(_wanted, pred))
            for kind in self.kinds(path)
        )

    def _cubes(
        self, n: int, pred: Callable[[Any], bool], path: str, limit: int | None, *, largest: bool = False
    ) -> Iterator[tuple[Mapping[int, tuple[int, ...]], int, int, Any]]:
        """The boxes of :meth:`~.mdd.Manager.cubes` over *path*'s kinds: each box, its exact
        cell count, its model kind and its terminal value; at most *limit* of them (*largest*:
        the largest *limit* of each kind)."""
        shown = 0
        full = [sum(ws) for ws in self.m.weights]
        for kind in self.kinds(path):
            fixed = self.fixed_for(kind)
            every = 1  # the kind's cells: every level's size (one for a level it lacks)
            for lv, size in enumerate(full):
                every *= 1 if lv in fixed else size
            region = self.m.ite(self._kind(kind), n, self.m.term(_NOWHERE))
            wanted = partial(_wanted, pred)
            if largest:
                assert limit is not None
                shown = 0
                found = self.m.largest_cubes(region, wanted, limit)
            else:
                found = self.m.cubes(region, wanted, limit)
            for box, value in found:
                # cells: the box's classes' weights in place of the sizes of the levels it fixes
                cells = every
                for lv, idx in box.items():
                    if lv not in fixed:
                        ws = self.m.weights[lv]
                        cells = cells // full[lv] * sum(ws[i] for i in idx)
                yield box, cells, kind, value
                shown += 1
                if limit is not None and shown >= limit:
                    return


def _wanted(pred: Callable[[Any], bool], v: Any) -> bool:
    return v is not _NOWHERE and pred(v)


class _Nowhere:
    """The terminal of cells outside a region (never satisfies a question about outcomes)."""

    def __repr__(self) -> str:
        return "<nowhere>"


_NOWHERE: Final = _Nowhere()


def _tests(c: Condition) -> list[Test]:
    return tests_of(c)


def _unknown_class(typed: Sequence[Mapping[str, Any]], key: str, i: int) -> bool:
    return typed[i].get(key) is None


def _prefers(policy: Policy, path: str) -> list[Rule]:
    """The ``prefer`` rules of *path* in the order the resolver applies them (shipped layer first, by id)."""
    by_id = sorted(policy.rules, key=lambda r: r.id)
    return [
        r
        for layer in ("shipped", "policy")
        for r in by_id
        if r.kind == "prefer" and r.layer == layer and r.applies_to(path)
    ]


def _front(backends: tuple[str, ...]) -> Callable[[tuple[str, ...]], tuple[str, ...]]:
    return lambda order: tuple(preferred(list(order), backends))


def _append(pick: Pick) -> Callable[[tuple[Pick, ...]], tuple[Pick, ...]]:
    return lambda t: (*t, pick)


def _applies(crashy: bool) -> Callable[[Any], bool]:
    return lambda s: s is True or (s is None and crashy)


def _not3(a: Any) -> Any:
    return None if a is None else not a


def _and3(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or3(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _retire(when: Any, until: Any) -> Any:
    return False if until is True else when
