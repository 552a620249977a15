"""Exhaustive verification: every cell of the finite domain, every path, read off the compiled diagrams.

:mod:`.compile` turns the policy into one decision diagram per path: the :class:`~.compile.Outcome`
the resolver reaches in each cell. Every question ``check`` asks is answered from the diagrams,
exactly and for every cell at once:

- ``no-backend``: a path the model has gets no valid backend in a completed state (one no
  implication changes: the resolver decides from those, and every input reaches one), where
  no ``unsupported`` entry declares it and no other path's explicit choices contradict (the
  resolver refuses such a deployment whole);
- ``contradiction``: explicit choices (``use`` rules, the deployment's own settings) contradict;
- ``denied-chosen``, ``unmet-requirement``, ``warmup``: the invariants of :func:`_check`, which
  a correct resolver never breaks (they are checked on the resolver's own decisions);
- rule usage (``fires``, ``sole``, ``first``: what ``dead`` and ``shadowed`` read), exact per cell;
- ``prefer`` rules of one layer that order one path differently for the same facts.

The diagrams are a model of the resolver. So that they cannot drift from what runs, every
distinct outcome of every path, and every cell a finding names, is resolved again with the
real resolver (:func:`kernelpolicy.resolver.resolve_path`) from a witness cell; a different
answer is a :class:`ModelDrift` error, never a silent proof. Findings take their words from
those resolves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Any, Final

from ..decision import Candidate, Decision
from ..dsl.conditions import evaluate
from ..errors import KernelPolicyError
from ..facts.record import Facts
from ..policy import Policy, Rule
from ..resolver import ContradictionError, resolve_path
from ..semantics import DECIDED_PATHS, applies, gravity, met, rule_state
from .compile import ABSENT, Compiled, Outcome, is_contradiction
from .domain import Domain, Group, build_domain
from .layered import Base, layer, reused
from .mdd import DEFAULT_BUDGET

__all__ = ["PATHS", "SHOW_BOXES", "Coverage", "ModelDrift", "PathGroup", "Usage", "Violation", "verify"]

PATHS: Final = DECIDED_PATHS
#: How many boxes of cells a violation keeps to name where it holds.
SHOW_BOXES: Final = 3


class ModelDrift(KernelPolicyError, AssertionError):
    """The compiled diagrams and the resolver decide a cell differently: a defect of kernelpolicy."""

    def __init__(self, path: str, cell: str, model: str, resolver: str) -> None:
        self.path, self.cell, self.model, self.resolver = path, cell, model, resolver
        super().__init__(path, cell, model, resolver)

    def __str__(self) -> str:
        return (
            f"internal error: the proof's diagram says {self.model} on path `{self.path}` in {self.cell}, "
            f"the resolver {self.resolver}; please report it"
        )


@dataclass(frozen=True)
class Violation:
    """An invariant broken in some cells of one path: how many, and the first few boxes of them."""

    code: str
    path: str
    group: Group  #: the first box of cells where it holds (its ``facts``: the cell resolved)
    message: str
    rules: tuple[str, ...] = ()
    cells: int = 0  #: every cell where it holds (``group.weight`` is the first box's)
    groups: tuple[Group, ...] = ()  #: the first :data:`SHOW_BOXES` boxes
    boxes: int = 0  #: how many boxes the cells make in the diagram's order
    candidates: tuple[Candidate, ...] = ()  #: the resolved cell's candidates, as its decision lists them


@dataclass(frozen=True)
class PathGroup:
    """A box of cells of one path that the diagram decides alike, and what breaks there."""

    path: str
    group: Group
    backend: str | None
    candidates: tuple[Candidate, ...]  #: as the decision of a cell of the same outcome lists them
    explicit: str | None  #: where an explicit choice for the path came from
    when: Mapping[str, bool | None]  #: each ``prefer`` rule's state in that cell
    error: str | None = None  #: resolving raised (contradictory explicit choices)
    violations: tuple[Violation, ...] = ()
    known: tuple[str, ...] = ()  #: ``unsupported`` entries that cover the box (no backend, knowingly)


@dataclass(frozen=True)
class Usage:
    """How a ``deny``/``require`` rule takes part in the decisions, over every cell.

    ``fires``: it rejects a candidate judged before the chosen one somewhere; ``sole``: as the
    only rule that does (where the candidate's catalog requirement holds), so it changes that
    decision; ``first``: as the gravest reason (the rule the decision names). ``by``: where it
    fires but is never first, the rule that most often rejects the same candidate with it.
    """

    fires: bool = False
    sole: bool = False
    first: bool = False
    by: str | None = None


@dataclass
class Coverage:
    """The outcome of an exhaustive run."""

    domain: Domain
    cells: int  #: cells verified per path (the domain size)
    compiled: Compiled | None = field(default=None, repr=False)
    #: the outcome diagrams as a certificate keeps them (:func:`~.checking.diagrams`), once made
    exported: dict[str, Any] | None = field(default=None, repr=False)
    nodes: dict[str, int] = field(default_factory=dict)  #: nodes of each path's outcome diagram
    outcomes: dict[str, int] = field(default_factory=dict)  #: distinct outcomes of each path
    resolves: int = 0  #: witness cells resolved with the real resolver
    seconds: float = 0.0
    violations: list[Violation] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=dict)
    #: ``unsupported`` entries that cover some completed state without a backend
    known: frozenset[str] = frozenset()
    #: ``prefer`` rules of one layer that order a path differently for the same facts:
    #: (rule, rule, path, a box of such cells)
    prefer_conflicts: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: each distinct outcome's resolved witness, by path (see :attr:`results`)
    witnesses: dict[tuple[str, Outcome], Decision | ContradictionError] = field(default_factory=dict, repr=False)
    #: path -> what builds its outcome paired with each cell's status for the checks, and the
    #: outcomes that break an invariant (what :attr:`regions` is built from)
    paired: dict[str, tuple[Callable[[], int], dict[Outcome, str]]] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return not self.violations

    @cached_property
    def regions(self) -> dict[str, int]:
        """path -> (outcome, status) diagram; built when first read (a check that does not
        list :attr:`results` never builds it: it is as large as the pair it is made from)."""
        c = self.compiled
        if c is None:
            return {}
        return {
            path: c.m.apply1(("status", path, tuple(broken.items())), partial(_status, broken), region())
            for path, (region, broken) in self.paired.items()
        }

    @cached_property
    def results(self) -> list[PathGroup]:
        """Every path's cells as disjoint boxes, each with its decision and the violations it
        holds (listed from the diagrams when first read: tens of thousands for the shipped tables)."""
        c = self.compiled
        if c is None:
            return []
        out: list[PathGroup] = []
        by_code: dict[tuple[str, str], Violation] = {(v.path, v.code): v for v in self.violations}
        for path in PATHS:
            region = self.regions.get(path)
            if region is None:
                continue
            for group, (o, status) in c.boxes(region, lambda v: v[0].kind != "absent", path):
                hit = self.witnesses.get((path, o))
                decision = hit if isinstance(hit, Decision) else None
                pd = decision.paths[path] if decision is not None else None
                found: tuple[Violation, ...] = ()
                if status in ("no-backend", "contradiction", "broken"):
                    model = next(
                        (v for (p, code), v in by_code.items() if p == path and _code_status(code) == status), None
                    )
                    if model is not None:
                        found = (replace(model, group=group, cells=group.weight, groups=(group,), boxes=1),)
                out.append(
                    PathGroup(
                        path,
                        group,
                        o.backend,
                        tuple(pd.candidates) if pd is not None else (),
                        o.explicit,
                        {},
                        str(hit) if isinstance(hit, ContradictionError) else None,
                        found,
                        tuple(status.split(":", 1)[1].split(",")) if status.startswith("known:") else (),
                    )
                )
        return out


def _code_status(code: str) -> str:
    return code if code in ("no-backend", "contradiction") else "broken"


def verify(
    policy: Policy,
    domain: Domain | None = None,
    *,
    explicit: bool = False,
    closed: bool = True,
    budget: int = DEFAULT_BUDGET,
    base: Base | None = None,
    usage: bool = True,
) -> Coverage:
    """Compile *policy* over its domain, check the invariants in every cell, and resolve a
    witness of every distinct outcome with the real resolver.

    :param base: the shipped tables' proof, when *policy* is they with an operator's layer:
        only the cells the layer can change are decided and witnessed again, and only the
        layer's rules get their usage (:mod:`.layered`; the shipped rules' findings are theirs).

    :param usage: read each rule's usage and the prefer conflicts (what ``dead``, ``shadowed``
        and ``prefer-conflict`` report); ``False`` proves the outcomes only (the proof below a
        layer, whose findings are not the layer's: :func:`~.checking.ground_proof`).
    :param closed: decide the completed states (see the module docstring); ``False`` decides
        every cell as given, for a policy without implications.
    :raises ModelDrift: the diagrams and the resolver disagree (a defect of kernelpolicy).
    :raises ~kernelpolicy.analysis.mdd.DiagramTooLarge: the diagrams pass *budget* nodes.
    """
    start = time.perf_counter()
    domain = domain or build_domain(policy, explicit=explicit)
    core = replace(policy, implications=(), digest=policy.digest + "+closed") if closed else policy
    manager = reused(base, domain) if base is not None and closed else None
    c = Compiled(core, domain, original=policy if closed else None, budget=budget, manager=manager)
    if base is not None and closed:
        layer(base, c)
    cov = Coverage(domain, domain.size, c)
    _Proof(c, core, cov, base.witnesses if base is not None and c.base is not None else {}).run(usage)
    cov.seconds = time.perf_counter() - start
    return cov


class _Proof:
    """The state of one exhaustive run: the compiled policy, each path's outcome diagram, what
    the witnesses resolved to, and the coverage being filled in."""

    def __init__(self, c: Compiled, policy: Policy, cov: Coverage, ground: Mapping[Any, Any]) -> None:
        self.c, self.m, self.policy, self.cov = c, c.m, policy, cov
        #: the witnesses of the proof below a layer (:class:`~.layered.Base`), by (path, outcome)
        self.ground = ground
        self.outcome = {path: c.outcome(path) for path in PATHS}
        self.closed = c.closed()
        self.users = {r.id.split(".env.", 1)[-1] for r in policy.rules if r.layer == "user"}

    def run(self, usage: bool = True) -> None:
        known: set[str] = set()
        for path in PATHS:
            self.cov.nodes[path] = self.m.size(self.outcome[path])
            known |= self._path(path)
        self.cov.known = frozenset(known)
        if usage:
            self._usage()
            self._prefers()

    def elsewhere(self, path: str) -> int:
        """Boolean: where another path's explicit choices contradict (the resolver decides nothing)."""
        m = self.m
        return m.any_of([m.where(self.outcome[q], is_contradiction, "contradiction") for q in PATHS if q != path])

    def _path(self, path: str) -> set[str]:
        """Check one path; return the ``unsupported`` entries that cover its holes.

        The outcome diagram is read alone (its values, a witness of each): it is never paired
        with the cells' status, a product many times its size (the closed states read the
        release dimensions the outcome reads elsewhere). The status is built only where it is
        small: the holes (counted cells without a backend) and, for an outcome that breaks an
        invariant, that outcome's cells."""
        m, c = self.m, self.c
        o_path = self.outcome[path]
        counted = m.AND(self.closed, m.NOT(self.elsewhere(path)))
        no_backend = m.where(o_path, _no_backend, "no backend")
        mine = [u for u in self.policy.unsupported if path in u.paths]
        covers = {u.id: c.holds(u.when) for u in mine}
        used = {u.id for u in mine if self._meets_hole(path, counted, no_backend, covers[u.id])}
        # the holes no entry covers: where a finding says `no-backend`
        bare = m.AND(m.AND(counted, no_backend), m.NOT(m.any_of(list(covers.values()))))
        outcomes = sorted({o for o in c.values(o_path, path) if o.kind != "absent"}, key=repr)
        self.cov.outcomes[path] = len(outcomes)
        reach = m.reach(c.by_kind(o_path, path))
        holes = m.ite(bare, o_path, m.term(_OUTSIDE))
        hole_top = c.by_kind(holes, path)
        hole_reach = m.reach(hole_top)
        bare_outcomes = {v for v in hole_reach[hole_top] if isinstance(v, Outcome)}
        fresh: set[Outcome] | None = None
        if c.base is not None:  # on the shipped tables' proof: what the layer decided again, and the holes
            fresh = set(c.values(m.ite(c.layered(path), o_path, m.term(_OUTSIDE)), path))
            outcomes = [o for o in outcomes if o in fresh or o in bare_outcomes or o.kind == "contradiction"]
        broken: dict[Outcome, str] = {}
        for o in outcomes:
            below = self.ground.get((path, o)) if fresh is not None and o not in fresh else None
            if below is not None:  # only outside the layer: decided as the proof below decided it
                hit = below
                self.cov.witnesses.setdefault((path, o), hit)
            elif o in bare_outcomes:  # a hole's witness names a hole
                hit = self._witness(path, o, holes, hole_reach)
            else:
                hit = self._witness(path, o, o_path, reach)
            if o.kind == "contradiction":
                assert isinstance(hit, ContradictionError)
                if not all(s in self.users or s.startswith("--") for s in hit.sources):
                    broken[o] = "contradiction"
                    self._violation("contradiction", path, self._is(path, o, reach), str(hit), (), None)
                continue
            assert isinstance(hit, Decision)
            for code, message, rules in _check(path, hit, self.policy):
                # no-backend: the outcome's uncovered holes; any other (never, for a correct
                # resolver): every completed state of the outcome
                if code == "no-backend" and o not in bare_outcomes:
                    continue
                where = m.AND(self._is(path, o, reach), bare if code == "no-backend" else counted)
                if not c.cells([where], path):
                    continue
                if code != "no-backend":
                    broken[o] = "broken"
                self._violation(code, path, where, message, rules, hit)
        self.cov.paired[path] = (partial(self._status, path, counted, mine), broken)
        return used

    def _is(self, path: str, o: Outcome, reach: Mapping[int, frozenset[Any]]) -> int:
        """Boolean: the cells of *path*'s kinds whose outcome is *o* (*reach*: of the outcome
        by kind), visiting only the nodes that reach it."""
        top = self.c.by_kind(self.outcome[path], path)
        return self.m.among(top, frozenset({o}), reach)

    def _meets_hole(self, path: str, counted: int, no_backend: int, here: int) -> bool:
        """Whether *here* meets a hole of *path* (a counted cell without a backend) in a cell of
        a kind *path* is decided for (a dense model's cells have no MoE hole), read without
        building the holes."""
        m, c = self.m, self.c
        kinds = c.kinds(path)
        if len(kinds) == 2:
            return m.meets([counted, no_backend, here])
        kind = c.moe if kinds[0] == c.moe_index else ~c.moe
        return m.meets([kind, counted, no_backend, here])

    def _status(self, path: str, counted: int, mine: Sequence[Any]) -> int:
        """*path*'s outcome paired with a cell's status (what :attr:`Coverage.regions` lists):
        ``out`` (not counted), or the ``unsupported`` entries whose ``when`` holds (a tuple of
        ids; read where the outcome has no backend: the entries that cover the hole)."""
        m, c = self.m, self.c
        covers = m.term(())
        for u in reversed(mine):
            covers = m.ite(c.holds(u.when), m.apply1(("covers", u.id), partial(_cons, u.id), covers), covers)
        status = m.ite(counted, covers, m.term("out"))
        return m.apply2(("region", path), _pair, self.outcome[path], status)

    def _witness(
        self, path: str, o: Outcome, region: int, reach: Mapping[int, frozenset[Any]]
    ) -> Decision | ContradictionError:
        """Resolve a cell of *region* whose value is *o* with the real resolver, and require
        its answer to be *o*."""
        c = self.c
        cell = c.witness(region, partial(_eq, o), path, reach)
        assert cell is not None, (path, o)
        raw, typed = c.facts(cell)
        facts = Facts._of(dict(raw), dict.fromkeys(raw, "user"), dict(typed))
        self.cov.resolves += 1
        try:
            got: Decision | ContradictionError = resolve_path(facts, self.policy, path)
        except ContradictionError as exc:
            got = exc.with_traceback(None)
        refusing = frozenset(u.id for u in self.policy.unsupported if u.refuse and path in u.paths)
        said = _said(got, path, refusing)
        if said != _expected(o):
            label = " x ".join(f"{k}={v}" for k, v in sorted(raw.items()))
            raise ModelDrift(path, label or "every cell", str(_expected(o)), str(said))
        self.cov.witnesses.setdefault((path, o), got)
        return got

    def _violation(
        self, code: str, path: str, where: int, message: str, rules: tuple[str, ...], hit: Decision | None
    ) -> None:
        c = self.c
        boxes = c.boxes(where, bool, path, SHOW_BOXES)
        cells = c.cells([where], path)
        total = sum(self.m.count_cubes(n, bool) for n in self._by_kinds(where, path))
        cands = tuple(hit.paths[path].candidates) if hit is not None else ()
        groups = tuple(g for g, _ in boxes)
        self.cov.violations.append(Violation(code, path, groups[0], message, rules, cells, groups, total, cands))

    def _by_kinds(self, n: int, path: str) -> Iterator[int]:
        c, m = self.c, self.m
        for kind in c.kinds(path):
            yield m.AND(n, c.moe if kind == c.moe_index else m.NOT(c.moe))

    # -- rule usage, exact

    def _usage(self) -> None:
        """Each rule's usage, read off the diagrams: the questions are conjunctions of a
        candidate's rule effects (:meth:`~.mdd.Manager.meets`), answered without building them."""
        m, c = self.m, self.c
        found: dict[str, Usage] = {}
        overlaps: dict[str, dict[str, int]] = {}
        for path in PATHS:
            o_path = self.outcome[path]
            if c.base is not None:  # a layer's rule takes effect only where the layer reaches
                o_path = m.ite(c.layered(path), o_path, m.term(ABSENT))
            reach: dict[int, frozenset[Any]] | None = None
            for b in self.policy.backends.get(path, {}):
                rules = self.policy.rules_for(b, path)
                if not rules or not any(c.reads_usage(r) for r in rules):
                    continue  # on the proof below a layer, only the layer's rules are read
                reach = reach or m.reach(o_path)
                ahead = m.where(o_path, _ahead(b), ("ahead", b), reach)
                if ahead != m.false:
                    self._candidate_usage(path, b, rules, ahead, found, overlaps)
        for rid, u in found.items():
            if not u.first and overlaps.get(rid):
                by = max(sorted(overlaps[rid]), key=lambda t: overlaps[rid][t])
                found[rid] = replace(u, by=by)
        self.cov.usage = found

    def _candidate_usage(
        self,
        path: str,
        b: str,
        rules: Sequence[Rule],
        ahead: int,
        found: dict[str, Usage],
        overlaps: dict[str, dict[str, int]],
    ) -> None:
        """The usage of the rules of candidate *b* of *path*, where *ahead* (boolean) is where
        it is judged before the chosen one."""
        m, c = self.m, self.c
        runs = ~c.fails(self.policy.backends[path][b].requires)  # its catalog requirement holds
        effects = [c.effect(r) for r in rules]
        for i, (r, eff) in enumerate(zip(rules, effects, strict=True)):
            if not c.reads_usage(r) or not m.intersects(ahead, eff):
                continue
            u = found.get(r.id, Usage())
            # sole: no other rule of the candidate takes effect; first: no graver one does
            others = [~e for j, e in enumerate(effects) if j != i]
            sole = u.sole or m.meets([ahead, runs, eff, *others])
            graver = [~e for t, e in zip(rules, effects, strict=True) if gravity(t.severity) < gravity(r.severity)]
            first = u.first or m.meets([ahead, runs, eff, *graver])
            found[r.id] = Usage(True, sole, first)
            if not first:
                mine = overlaps.setdefault(r.id, {})
                both = m.AND(ahead, eff)
                for t, e in zip(rules, effects, strict=True):
                    if t is not r and gravity(t.severity) <= gravity(r.severity):
                        n = c.cells([both, e], path)
                        if n:
                            mine[t.id] = mine.get(t.id, 0) + n

    def _prefers(self) -> None:
        m, c = self.m, self.c
        prefers = [r for r in self.policy.rules if r.kind == "prefer"]
        seen: set[tuple[str, str, str]] = set()
        for path in PATHS:
            mine = [r for r in prefers if r.applies_to(path)]
            for i, a in enumerate(mine):
                for b in mine[i + 1 :]:
                    if a.layer != b.layer or (a.id, b.id, path) in seen or not _conflict(a.backends, b.backends):
                        continue
                    both = m.AND(c.active(a.id), c.active(b.id))
                    if path in ("moe", "router"):
                        both = m.AND(both, c.moe)
                    boxes = c.boxes(both, bool, path, 1)
                    if boxes:
                        seen.add((a.id, b.id, path))
                        self.cov.prefer_conflicts.append((a.id, b.id, path, boxes[0][0].label()))


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    return (a, b)


def _cons(x: str, t: tuple[str, ...]) -> tuple[str, ...]:
    return (x, *t)


def _eq(o: Outcome, v: Any) -> bool:
    return bool(v == o)


#: the value of a cell outside a region read for witnesses (no outcome equals it)
_OUTSIDE: Final = ("outside",)


def _status(broken: Mapping[Outcome, str], v: tuple[Outcome, Any]) -> tuple[Outcome, str]:
    """A cell's status for :attr:`Coverage.results`."""
    o, s = v
    if o in broken and (broken[o] == "contradiction" or s != "out"):
        return (o, broken[o])
    if s != "out" and _no_backend(o):
        return (o, f"known:{','.join(s)}" if s else "no-backend")
    return (o, "ok")


def _no_backend(o: Any) -> bool:
    return isinstance(o, Outcome) and o.decided and o.backend is None


def _ahead(b: str) -> Callable[[Any], bool]:
    """Whether *b* is judged before the chosen candidate (a refused path counts every candidate)."""
    return lambda o: isinstance(o, Outcome) and o.decided and b in o.judged


def _tag(status: str) -> Callable[[Any], tuple[Any, str]]:
    return lambda o: (o, status)


def _conflict(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    common = [x for x in a if x in b]
    return common != [x for x in b if x in a]


def _expected(o: Outcome) -> tuple[Any, ...]:
    """What the resolver must decide where the diagram says *o*."""
    if o.kind == "contradiction":
        return ("contradiction", o.sources)
    return (o.kind, o.backend, o.judged, o.explicit, o.rule)


def _said(got: Decision | ContradictionError, path: str, refusing: frozenset[str]) -> tuple[Any, ...]:
    """What the resolver decided, in :func:`_expected`'s terms (*refusing*: the ids of the
    ``unsupported`` entries that refuse *path*)."""
    if isinstance(got, ContradictionError):
        return ("contradiction", got.sources)
    pd = got.paths[path]
    if not pd.applicable:
        return ("absent", None, (), None, None)
    names = [c.backend for c in pd.candidates]
    if pd.backend is not None:
        at = next(i for i, c in enumerate(pd.candidates) if c.verdict == "chosen")
        before = names[1:at] if pd.explicit is not None and at > 0 else names[:at]
        return ("chosen", pd.backend, tuple(before), pd.explicit, None)
    judged = tuple(names[1:] if pd.explicit is not None else names)
    if pd.rule is not None and pd.rule in refusing:
        return ("refused", None, judged, pd.explicit, pd.rule)
    return ("none", None, judged, pd.explicit, None)


# --------------------------------------------------------------------------- invariants


def _state(r: Rule, typed: Mapping[str, Any]) -> bool | None:
    until = evaluate(r.until, typed) if r.until is not None else None
    return rule_state(evaluate(r.when, typed), until)


def _check(path: str, d: Decision, policy: Policy) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """The invariants the resolver's decision of *path* breaks: (code, message, rules)."""
    pd = d.paths[path]
    if not pd.applicable:
        return
    typed = d.facts.typed()
    if pd.backend is None:
        why = "; ".join(
            f"`{c.backend}`: {c.rules[0] if c.rules else c.reason}" for c in pd.candidates if c.verdict != "viable"
        )
        yield "no-backend", f"path `{path}` has no valid backend ({why})", ()
    else:
        b = pd.backend
        cand = next(c for c in pd.candidates if c.backend == b)
        overridden = set(cand.overridden)
        for r in policy.rules_for(b, path):
            w = _state(r, typed)
            if r.kind == "deny" and applies(r.kind, r.severity, w):
                if r.id in overridden and pd.explicit:
                    continue
                yield "denied-chosen", f"path `{path}` chooses `{b}`, which rule `{r.id}` denies", (r.id,)
            elif r.kind == "require" and applies(r.kind, r.severity, w) and not met(evaluate(r.require, typed)):
                if r.id in overridden:
                    continue
                yield (
                    "unmet-requirement",
                    f"path `{path}` chooses `{b}` although rule `{r.id}` requires what these facts lack",
                    (r.id,),
                )
        entry = policy.backends[path][b]
        if not met(evaluate(entry.requires, typed)) and entry.rule_id not in overridden:
            yield (
                "unmet-requirement",
                f"path `{path}` chooses `{b}` although its catalog requirement is not met",
                (entry.rule_id,),
            )
    yield from _warmup_violations(path, d, policy)


def _warmup_violations(path: str, d: Decision, policy: Policy) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """Warmup warms only kernels of backends this path chose, and each such kernel unless denied."""
    pd = d.paths[path]
    mine = {k for k in d.warmup if k.endswith(f".{path}")}
    for k in sorted(mine):
        if k != f"{pd.backend}.{path}":
            yield "warmup", f"warmup warms `{k}`, but path `{path}` runs `{pd.backend}`", ()
    ran = pd.backend
    if ran is not None and policy.backends[path][ran].warmup and f"{ran}.{path}" not in mine:
        denied = [
            r
            for r in policy.rules_for(ran, "warmup")
            if r.paths and "warmup" in r.paths and applies(r.kind, r.severity, _state(r, d.facts.typed()))
        ]
        if not denied:
            yield "warmup", f"path `{path}` runs JIT backend `{ran}` but warmup does not warm `{ran}.{path}`", ()
