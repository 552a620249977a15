"""The resolver: facts + policy -> one :class:`~kernelpolicy.decision.Decision`. Pure.

For each of ``dense``, ``moe`` and ``router`` it orders the path's backends (the catalog's
``order`` for these facts, then ``prefer`` rules, then an explicit choice first) and judges
each candidate against the catalog requirement and every ``deny``/``require`` rule aimed at
it. The first candidate nothing rejects is chosen. ``warmup`` is derived: it warms a JIT
kernel only when another path chose that backend.

Unknown facts: a ``deny`` rule whose condition is undecided applies when its severity is
``crash`` and not otherwise; a requirement (catalog ``requires`` or a ``require`` rule) whose
facts are unknown is assumed met. Both are recorded as assumptions in the decision.

Explicit choices (``--moe-backend``, engine environment variables, ``use`` rules of a
policy) override ``accuracy``, ``perf`` and ``support`` rules with a warning, on every path
alike; a ``crash`` rule or an unmet catalog requirement only when the choice names its id.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._args import check_arg, check_strs
from .decision import Assumption, Candidate, Decision, Override, PathDecision, _Later
from .dsl.conditions import Condition, TruthValue, compiled, describe_failure, evaluate, failing_tests
from .errors import KernelPolicyError
from .facts.record import Facts
from .policy import Policy, Rule, Unsupported
from .reporters import BaseReporter
from .semantics import (
    DECIDED_PATHS,
    FACT_PICKS,
    ImplicationConflict,
    Pick,
    applies,
    can_override,
    gravity,
    imply,
    met,
    one_pick,
    pick_outcome,
    preferred,
    rule_state,
)

__all__ = ["DECIDED_PATHS", "ContradictionError", "ImplicationConflict", "apply_implications", "resolve"]

_NULL_REPORTER: Final = BaseReporter()
_UNSET: Final = object()
_CACHE_MAX: Final = 4096
_SAME_MAX: Final = 128  #: entries held by identity (each keeps its policy alive)


class ContradictionError(KernelPolicyError, ValueError):
    """Explicit choices that contradict each other (two backends for one path, say)."""

    def __init__(self, path: str, sources: tuple[str, ...], message: str) -> None:
        check_arg("ContradictionError", "path", path, str)
        check_strs("ContradictionError", "sources", sources)
        check_arg("ContradictionError", "message", message, str)
        self.path = path
        self.sources = sources
        self.message = message
        super().__init__(path, sources, message)

    def __str__(self) -> str:
        return f"contradictory overrides on path `{self.path}`: {self.message}"


@dataclass(frozen=True)
class _Rejection:
    rule: str
    severity: str
    why: str | Callable[[], str]  #: the reason, or how to word it (worded only when read)
    refs: tuple[str, ...]
    assumed: bool  #: applied only because a fact it reads is unknown

    @property
    def reason(self) -> str:
        return self.why if isinstance(self.why, str) else self.why()


_Fn = Callable[[Mapping[str, Any]], TruthValue]


class _Index:
    """What the resolver reads of one policy, looked up once: compiled conditions, the rules
    aimed at each backend, the ``prefer`` rules of each path in the order they apply."""

    def __init__(self, policy: Policy) -> None:
        # by id, the last rule of an id wins (as a dict built over the rules would have it)
        self.state_fns: dict[str, tuple[_Fn, _Fn | None]] = {
            r.id: (compiled(r.when), compiled(r.until) if r.until is not None else None) for r in policy.rules
        }
        self.uses = tuple(r for r in policy.rules if r.kind == "use")
        by_id = sorted(policy.rules, key=lambda r: r.id)
        self.orders: dict[str, tuple[tuple[_Fn, tuple[str, ...]], ...]] = {}
        self.prefers: dict[str, tuple[Rule, ...]] = {}
        for path in DECIDED_PATHS:
            entries = policy.orders.get(path, ())
            self.orders[path] = tuple(
                (compiled(o.when), o.backends)
                for layer in ("policy", "shipped")
                for o in entries
                if o.origin.layer == layer
            )
            # within a layer, by id: the outcome never depends on file or rule order (two
            # conflicting `prefer` rules of one layer are a `contradiction` for `kernelpolicy check`)
            self.prefers[path] = tuple(
                r
                for layer in ("shipped", "policy")
                for r in by_id
                if r.kind == "prefer" and r.layer == layer and r.applies_to(path)
            )
        #: per path, the ``unsupported`` entries that decide (``refuse``): where one holds, no backend
        self.refusals: dict[str, tuple[tuple[Unsupported, _Fn], ...]] = {
            path: tuple((u, compiled(u.when)) for u in policy.unsupported if u.refuse and path in u.paths)
            for path in DECIDED_PATHS
        }
        self.requires: dict[tuple[str, str], _Fn] = {
            (path, b): compiled(e.requires) for path, entries in policy.backends.items() for b, e in entries.items()
        }
        self.judged: dict[tuple[str, str], tuple[tuple[Rule, _Fn | None], ...]] = {
            (b, path): tuple(
                (r, compiled(r.require) if r.kind == "require" else None) for r in policy.rules_for(b, path)
            )
            for path, entries in policy.backends.items()
            for b in entries
        }


_indexes: weakref.WeakKeyDictionary[Policy, _Index] = weakref.WeakKeyDictionary()


def _index_of(policy: Policy) -> _Index:
    index = _indexes.get(policy)
    if index is None:
        index = _indexes[policy] = _Index(policy)
    return index


class _Cache:
    """Decisions by policy and facts: first by identity (the same objects asked again, as a
    process that built its facts once does), then by equal facts."""

    def __init__(self) -> None:
        self.same: dict[tuple[int, int], tuple[Facts, Policy, Decision]] = {}
        self.equal: dict[tuple[int, Facts], Decision] = {}

    def get(self, facts: Facts, policy: Policy) -> Decision | None:
        hit = self.same.get((id(facts), id(policy)))
        if hit is not None and hit[0] is facts and hit[1] is policy:
            return hit[2]
        decision = self.equal.get((id(policy), facts))
        if decision is None or decision.policy_digest != policy.digest:
            return None
        self._keep(facts, policy, decision)
        return decision

    def put(self, facts: Facts, policy: Policy, decision: Decision) -> None:
        if len(self.equal) >= _CACHE_MAX:
            self.equal.clear()
        self.equal[id(policy), facts] = decision
        self._keep(facts, policy, decision)

    def _keep(self, facts: Facts, policy: Policy, decision: Decision) -> None:
        if len(self.same) >= _SAME_MAX:
            self.same.clear()
        self.same[id(facts), id(policy)] = (facts, policy, decision)  # holds both: their ids stay theirs

    def clear(self) -> None:
        self.same.clear()
        self.equal.clear()


_cache = _Cache()


def resolve(facts: Facts, policy: Policy, reporter: BaseReporter | None = None) -> Decision:
    """Decide every path for *facts* under *policy*.

    Deterministic: the same facts and policy give an equal decision with the same
    fingerprint, whatever the order of the files the policy was loaded from. Results are
    cached per policy and facts when no *reporter* is given.

    :raises ContradictionError: when explicit choices contradict each other.
    :raises ImplicationConflict: when implications set one fact to different values.
    :raises TypeError: naming the parameter, for an argument of the wrong type.
    """
    check_arg("resolve", "facts", facts, Facts)
    check_arg("resolve", "policy", policy, Policy)
    check_arg("resolve", "reporter", reporter, BaseReporter, type(None))
    if reporter is None:
        hit = _cache.get(facts, policy)
        if hit is not None:
            return hit
        decision = _Resolution(facts, policy, _NULL_REPORTER).run()
        _cache.put(facts, policy, decision)
        return decision
    return _Resolution(facts, policy, reporter).run()


def resolve_path(facts: Facts, policy: Policy, path: str) -> Decision:
    """Decide one path (and the warmup of its kernels) for *facts*, uncached: the exhaustive
    check walks each path on its own, and the other paths' decisions are not read there. The
    path's candidates end at the chosen one (those after it change nothing and are not judged).

    :raises ContradictionError: when explicit choices for *path* contradict each other (those
        of the other paths are not looked at: :func:`resolve` refuses the deployment for them).
    """
    res = _Resolution(facts, policy, _NULL_REPORTER)
    res.judged_only = True
    return res.run((path,))


def apply_implications(facts: Facts, policy: Policy, reporter: BaseReporter = _NULL_REPORTER) -> Facts:
    """Set unknown facts that follow from known ones, to a fixpoint; known facts never change
    (see :func:`kernelpolicy.semantics.imply`)."""
    return imply(facts, policy.implications, reporter)


class _Resolution:
    """The state of one resolution: the facts, every rule's applicability, and the trace."""

    def __init__(self, facts: Facts, policy: Policy, reporter: BaseReporter) -> None:
        self.policy = policy
        self.reporter = reporter
        self.index = _index_of(policy)
        #: build the explanation only when it is read (no reporter is watching every verdict)
        self.lazy = reporter is _NULL_REPORTER
        #: list only the candidates judged up to the chosen one (:func:`resolve_path`)
        self.judged_only = False
        self.facts = apply_implications(facts, policy, reporter)
        self.typed = self.facts.typed()
        self._states: dict[str, bool | None] = {}
        self.assumptions: list[_Noted] = []  #: what the outcome rests on, worded when read
        self.overrides: list[Override] = []
        self.warnings: list[str] = []

    def state(self, rule_id: str) -> bool | None:
        """The rule's ``when`` after retirement (:func:`~kernelpolicy.semantics.rule_state`),
        evaluated the first time a rule of that id is read."""
        s = self._states.get(rule_id, _UNSET)
        if s is _UNSET:
            when, until = self.index.state_fns[rule_id]
            s = self._states[rule_id] = rule_state(when(self.typed), until(self.typed) if until is not None else None)
        return s  # type: ignore[return-value]

    def run(self, only: tuple[str, ...] = DECIDED_PATHS) -> Decision:
        self.reporter.starting(self.facts)
        picks = self._explicit_picks(only)
        paths = {path: self._path(path, picks.get(path)) for path in only}
        paths["warmup"] = self._warmup(paths)
        decision = Decision(
            facts=self.facts,
            paths=paths,
            policy_digest=self.policy.digest,
            overrides=tuple(self.overrides),
            warnings=tuple(dict.fromkeys(self.warnings)),
            assumptions=_Later(self._assumptions) if self.lazy else self._assumptions(),
        )
        self.reporter.ending(decision)
        return decision

    def _assumptions(self) -> tuple[Assumption, ...]:
        uniq: dict[tuple[str, str], Assumption] = {}
        for a in _expand(self.assumptions):
            uniq.setdefault((a.fact, a.rule), a)
        return tuple(uniq.values())

    # -- explicit choices

    def _explicit_picks(self, only: tuple[str, ...]) -> dict[str, Pick]:
        """The explicit backend choice per path (warnings about choices that lost are kept)."""
        allowed = tuple(self.facts.get("deploy.allow_rules", ()) or ())
        by_path: dict[str, list[Pick]] = {}
        for key, path, flag in FACT_PICKS:
            b = self.facts.get(key)
            if b is not None:
                by_path.setdefault(path, []).append(Pick(str(b), f"{flag} {b}", allowed, "user"))
        for r in self.index.uses:
            if self.state(r.id) is not True:
                continue
            source = r.id if r.layer == "policy" else r.id.split(".env.", 1)[-1]
            for path in r.paths or [p for p in DECIDED_PATHS if r.backends[0] in self.policy.backends.get(p, {})]:
                denier = self._user_denier(r.backends[0], path)
                if denier is not None:
                    # the deployment's own setting wins: over a broader one of its own
                    # (VLLM_MOE_USE_DEEP_GEMM=0 over VLLM_USE_DEEP_GEMM=1) and over the policy
                    if r.layer == "policy":
                        self.warnings.append(
                            f"`{denier.id.split('.env.', 1)[-1]}` wins over policy `{r.id}` on path `{path}`"
                        )
                    continue
                named = r.overrides + (allowed if r.layer == "user" else ())
                by_path.setdefault(path, []).append(Pick(r.backends[0], source, named, r.layer))
        return {path: self._one_pick(path, options) for path, options in by_path.items() if path in only}

    def _one_pick(self, path: str, options: list[Pick]) -> Pick:
        best = one_pick(options)
        if isinstance(best, tuple):
            raise ContradictionError(
                path,
                tuple(o.source for o in best),
                " and ".join(f"`{o.source}` asks for `{o.backend}`" for o in best),
            )
        assert best is not None
        for o in options:
            if o.backend != best.backend:
                self.warnings.append(f"`{best.source}` wins over policy `{o.source}` on path `{path}`")
        return best

    def _user_denier(self, backend: str, path: str) -> Rule | None:
        """The deployment's own setting that denies *backend* on *path*, if one applies."""
        for r in self.policy.rules_for(backend, path):
            if r.kind == "deny" and r.layer == "user" and self.state(r.id) is True:
                return r
        return None

    # -- one path

    def _path(self, path: str, pick: Pick | None) -> PathDecision:
        if path in ("moe", "router") and self.facts.get("model.is_moe") is False:
            self.reporter.ending_path(path, None)
            return PathDecision(path, None, reason="the model has no MoE layers", present=False)
        if not self.policy.backends.get(path):  # a table with no catalog for the path (attention: issue #39)
            self.reporter.ending_path(path, None)
            return PathDecision(path, None, reason=f"the rule tables have no `{path}` catalog", present=False)
        order, preferred_by = self._order(path)
        if pick is not None:
            if pick.backend not in self.policy.backends[path]:
                raise ContradictionError(
                    path,
                    (pick.source,),
                    f"`{pick.source}`: `{pick.backend}` is not a backend of this path",
                )
            order = [pick.backend] + [b for b in order if b != pick.backend]
        self.reporter.starting_path(path, tuple(order))
        refusal = next((u for u, when in self.index.refusals[path] if when(self.typed) is True), None)
        if refusal is not None:
            return self._refused(path, order, pick, refusal, preferred_by)
        cands, chosen, deciding = _PathJudge(self, path, pick).decide(order)
        explicit_won = pick is not None and chosen == pick.backend
        self.reporter.ending_path(path, chosen)
        return PathDecision(
            path,
            chosen,
            cands,
            rule=pick.source if explicit_won and pick is not None else (deciding[0] if deciding else None),
            rules=deciding,
            reason=None if chosen else self._no_backend_reason(path),
            explicit=pick.source if pick is not None else None,
            preferred_by=preferred_by,
        )

    def _refused(
        self, path: str, order: list[str], pick: Pick | None, u: Unsupported, preferred_by: tuple[str, ...]
    ) -> PathDecision:
        """The path where an ``unsupported`` entry that decides (``refuse``) holds: every backend is
        out for the entry's reason (an explicit choice too: the engine refuses the deployment)."""
        cands = tuple(Candidate(b, "rejected", (u.id,), u.because, "support", u.refs) for b in order)
        if not self.lazy:
            for c in cands:
                self.reporter.judging(path, c)
        self.reporter.ending_path(path, None)
        return PathDecision(
            path,
            None,
            cands,
            rule=u.id,
            rules=(u.id,),
            reason=_known_unsupported(u),
            explicit=pick.source if pick is not None else None,
            preferred_by=preferred_by,
        )

    def _no_backend_reason(self, path: str) -> str:
        for u in self.policy.unsupported:
            if path in u.paths and evaluate(u.when, self.typed) is True:
                return _known_unsupported(u)
        return f"no backend of path `{path}` is valid for these facts"

    def _order(self, path: str) -> tuple[list[str], tuple[str, ...]]:
        """The catalog order for these facts (the first ``order`` entry that holds, policy
        layer first), then the ``prefer`` rules in force (see :class:`_Index`); with the ids of
        the ``prefer`` rules that moved it, in the order they applied."""
        typed = self.typed
        order = next((list(backends) for when, backends in self.index.orders[path] if when(typed) is True), [])
        order += [b for b in self.policy.backends[path] if b not in order]
        moved: list[str] = []
        for r in self.index.prefers[path]:
            if self.state(r.id) is True:
                after = preferred(order, r.backends)
                if after != order:
                    moved.append(r.id)
                order = after
        return order, tuple(moved)

    # -- warmup, derived from the other paths

    def _warmup(self, paths: Mapping[str, PathDecision]) -> PathDecision:
        kernels: list[str] = []
        cands: list[Candidate] = []
        for path in DECIDED_PATHS:
            if path not in paths:
                continue
            ran = paths[path].backend
            for b, entry in self.policy.backends[path].items():
                if not entry.warmup:
                    continue
                kernel = f"{b}.{path}"
                if ran != b:
                    why = f"path `{path}` runs `{ran}`" if ran else f"path `{path}` runs no backend"
                    cands.append(Candidate(kernel, "rejected", reason=why))
                    continue
                deny = [r for r in self.policy.rules_for(b, "warmup") if self._denies_warmup(r)]
                if deny:
                    cands.append(
                        Candidate(kernel, "rejected", tuple(r.id for r in deny), deny[0].because, deny[0].severity)
                    )
                    continue
                kernels.append(kernel)
                cands.append(Candidate(kernel, "chosen"))
        return PathDecision("warmup", None, tuple(cands), kernels=tuple(kernels))

    def _denies_warmup(self, r: Rule) -> bool:
        return bool(r.paths) and "warmup" in (r.paths or ()) and applies(r.kind, r.severity, self.state(r.id))


class _PathJudge:
    """Judges one path's candidates in order; the first nothing rejects is chosen.

    What decides (the chosen backend, the deciding rules, the assumptions and overrides) is
    worked out at once, stopping at the chosen candidate. The explanation (each candidate's
    verdict in words, and the verdicts of the candidates after the chosen one) is built when
    first read, unless a reporter watches every verdict.
    """

    def __init__(self, res: _Resolution, path: str, pick: Pick | None) -> None:
        self.res = res
        self.path = path
        self.pick = pick
        self.chosen: str | None = None
        self.deciding: list[str] = []

    def decide(
        self, order: list[str]
    ) -> tuple[tuple[Candidate, ...] | _Later[tuple[Candidate, ...]], str | None, tuple[str, ...]]:
        head: list[Callable[[], Candidate]] = []
        rest: list[str] = []
        for i, b in enumerate(order):
            if self.chosen is not None and self.res.lazy:
                # nothing after the chosen candidate changes the outcome
                rest = [] if self.res.judged_only else order[i:]
                break
            head.append(self._judge(b))
        deciding = tuple(dict.fromkeys(self.deciding))
        if not self.res.lazy:
            return tuple(c() for c in head), self.chosen, deciding
        return _Later(lambda: tuple(c() for c in head) + tuple(self._after(b) for b in rest)), self.chosen, deciding

    def _judge(self, b: str) -> Callable[[], Candidate]:
        """Judge *b*, record what it contributes to the outcome, and return how to word its verdict."""
        mine: list[_Noted] = []
        explicit = self.pick is not None and b == self.pick.backend
        rejections = self.rejections(b, mine, explicit)
        cand: Callable[[], Candidate]
        if explicit:
            cand = _ready(self._explicit(b, rejections))
        elif rejections:
            if any(not x.assumed for x in rejections):
                mine = []  # rejected on known facts: nothing it assumed changed the outcome
            cand = _rejected(b, rejections, mine)
            if self.chosen is None and not any(x.severity == "catalog" for x in rejections):
                self.deciding.append(rejections[0].rule)
        elif self.chosen is None:
            cand = _chosen(b, mine)
            self.chosen = b
        else:
            cand = _ready(Candidate(b, "viable"))
        if self.chosen is None or self.chosen == b:
            self.res.assumptions += mine  # only what shaped the outcome: candidates up to the chosen one
        if not self.res.lazy:
            self.res.reporter.judging(self.path, cand())
        return cand

    def _after(self, b: str) -> Candidate:
        """The verdict on *b*, a candidate after the chosen one (nothing it does counts)."""
        mine: list[_Noted] = []
        rejections = self.rejections(b, mine, False)
        if not rejections:
            return Candidate(b, "viable")
        return _rejected(b, rejections, [] if any(not x.assumed for x in rejections) else mine)()

    def _explicit(self, b: str, rejections: list[_Rejection]) -> Candidate:
        """The explicitly chosen backend: chosen unless a rule it may not override rejects it."""
        assert self.pick is not None
        pick, path, res = self.pick, self.path, self.res
        ids = tuple(dict.fromkeys(x.rule for x in rejections))
        refs = tuple(dict.fromkeys(ref for x in rejections for ref in x.refs))
        outcome = pick_outcome(((x.severity, x.rule) for x in rejections), pick.overrides)
        if outcome == "contradiction":
            denier = next(x.rule for x in rejections if x.severity == "user")
            why = f"`{pick.source}` chooses `{b}`, which `{denier}` denies"
            raise ContradictionError(path, (pick.source, denier), why)
        blocking = [x for x in rejections if not can_override(x.severity, x.rule, pick.overrides)]
        if outcome == "refused":
            res.overrides.append(Override(path, b, pick.source, tuple(x.rule for x in blocking), False))
            res.warnings.append(
                f"`{pick.source}` refused on path `{path}`: `{b}` is denied by `{blocking[0].rule}` "
                f"({blocking[0].severity}): {blocking[0].reason}; name the rule id to override it"
            )
            self.deciding.append(blocking[0].rule)
            return Candidate(b, "refused", ids, blocking[0].reason, blocking[0].severity, refs)
        if ids:
            res.overrides.append(Override(path, b, pick.source, ids, True))
            for x in rejections:
                res.warnings.append(f"`{pick.source}` overrides `{x.rule}` ({x.severity}) on path `{path}`: {x.reason}")
        self.chosen = b
        return Candidate(b, "chosen", (), None, None, refs, overridden=ids)

    def rejections(self, backend: str, assumptions: list[_Noted], explicit: bool) -> list[_Rejection]:
        """Every reason *backend* cannot run on the path, known facts first, gravest first
        (and, in *assumptions*, what the verdict assumes about unknown facts).

        A backend whose catalog requirement fails is rejected for that reason alone (unless it
        was chosen explicitly, when every reason counts).
        """
        res, path = self.res, self.path
        typed = res.typed
        out: list[_Rejection] = []
        entry = res.policy.backends[path][backend]
        if not entry.auto and not explicit:
            why = "chosen only when the deployment asks for it explicitly"
            return [_Rejection(entry.rule_id, "catalog", why, entry.refs, False)]
        tv = res.index.requires[path, backend](typed)
        if not met(tv):
            out.append(_Rejection(entry.rule_id, "catalog", _needs(entry.requires, typed), entry.refs, False))
            if not explicit:  # it cannot run here at all: no other rule needs a say
                return out
        elif tv is None:
            assumptions.append(_Noted(entry.requires, typed, entry.rule_id, f"assumed `{backend}` on `{path}` has "))
        for r, require in res.index.judged[backend, path]:
            x = self._rejection(r, require, backend, assumptions)
            if x is not None:
                out.append(x)
        if len(out) > 1:
            out.sort(key=lambda x: (x.assumed, gravity(x.severity)))
        return out

    def _rejection(self, r: Rule, require: _Fn | None, backend: str, assumptions: list[_Noted]) -> _Rejection | None:
        typed = self.res.typed
        w = self.res.state(r.id)
        if not applies(r.kind, r.severity, w):
            return None
        if require is None:  # a deny rule
            if w is None:
                assumptions.append(_Noted(r.when, typed, r.id, backend, None))
            return _Rejection(r.id, r.severity, r.because, r.refs, w is None)
        rv = require(typed)
        if rv is None:
            assumptions.append(_Noted(r.require, typed, r.id, "assumed ", f" for `{backend}`"))
        if met(rv):
            return None
        return _Rejection(r.id, r.severity, _needs(r.require, typed, r.because), r.refs, False)


def _known_unsupported(u: Unsupported) -> str:
    return f"known unsupported (`{u.id}`, {u.origin}): {u.because}" + (f"; {u.help}" if u.help else "")


def _needs(cond: Condition, typed: Mapping[str, Any], because: str | None = None) -> Callable[[], str]:
    """How to word an unmet requirement, when the words are read."""

    def word() -> str:
        why = describe_failure(cond, typed)
        return f"{because} (needs {why})" if because is not None else f"needs {why}"

    return word


@dataclass(frozen=True)
class _Noted:
    """Assumptions a verdict makes about the unknown facts of *cond*, worded when read: for a
    requirement, one per unknown test (``{before}{test}{after}``); for a crash rule applied
    while undecided (*before* is the backend), one per unknown key."""

    cond: Condition
    typed: Mapping[str, Any]
    rule: str
    before: str
    after: str | None = ""

    def assumptions(self) -> list[Assumption]:
        unknown = failing_tests(self.cond, self.typed)[1]
        if self.after is None:
            return [
                Assumption(k, self.rule, f"crash rule applied: `{self.before}` denied while `{k}` is unknown")
                for k in sorted({t.key for t in unknown})
            ]
        return [Assumption(t.key, self.rule, f"{self.before}{t.describe()}{self.after}") for t in unknown]


def _expand(noted: list[_Noted]) -> list[Assumption]:
    return [a for n in noted for a in n.assumptions()]


def _chosen(b: str, mine: list[_Noted]) -> Callable[[], Candidate]:
    return lambda: Candidate(b, "chosen", assumptions=tuple(dict.fromkeys(a.fact for a in _expand(mine))))


def _ready(cand: Candidate) -> Callable[[], Candidate]:
    return lambda: cand


def _rejected(b: str, rejections: list[_Rejection], assumed: list[_Noted]) -> Callable[[], Candidate]:
    """How to word *b*'s rejection (the rule ids are settled now, the reason when read)."""
    rules = tuple(dict.fromkeys(x.rule for x in rejections))

    def word() -> Candidate:
        facts = tuple(dict.fromkeys(a.fact for a in _expand(assumed)))
        return Candidate(
            b,
            "rejected",
            rules,
            _Later(lambda: rejections[0].reason),
            rejections[0].severity,
            tuple(dict.fromkeys(ref for x in rejections for ref in x.refs)),
            assumptions=facts,
        )

    return word
