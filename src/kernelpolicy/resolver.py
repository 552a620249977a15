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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .decision import Assumption, Candidate, Decision, Override, PathDecision
from .dsl.conditions import describe_failure, evaluate, failing_tests
from .engines import engine_flags
from .errors import KernelPolicyError
from .facts._record import Facts
from .policy import Policy, Rule
from .reporters import BaseReporter
from .semantics import (
    DECIDED_PATHS,
    ImplicationConflict,
    applies,
    can_override,
    gravity,
    imply,
    met,
    rule_state,
)

__all__ = ["DECIDED_PATHS", "ContradictionError", "ImplicationConflict", "apply_implications", "resolve"]

_NULL_REPORTER: Final = BaseReporter()
_CACHE_MAX: Final = 4096


class ContradictionError(KernelPolicyError, ValueError):
    """Explicit choices that contradict each other (two backends for one path, say)."""

    def __init__(self, path: str, sources: tuple[str, ...], message: str) -> None:
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
    reason: str
    refs: tuple[str, ...]
    assumed: bool  #: applied only because a fact it reads is unknown


@dataclass(frozen=True)
class _Pick:
    backend: str
    source: str
    overrides: tuple[str, ...]
    layer: str


_cache: dict[tuple[int, Facts], Decision] = {}


def resolve(facts: Facts, policy: Policy, reporter: BaseReporter | None = None) -> Decision:
    """Decide every path for *facts* under *policy*.

    Deterministic: the same facts and policy give an equal decision with the same
    fingerprint, whatever the order of the files the policy was loaded from. Results are
    cached per policy and facts when no *reporter* is given.

    :raises ContradictionError: when explicit choices contradict each other.
    :raises ImplicationConflict: when implications set one fact to different values.
    """
    if reporter is None:
        key = (id(policy), facts)
        hit = _cache.get(key)
        if hit is not None and hit.policy_digest == policy.digest:
            return hit
        decision = _Resolution(facts, policy, _NULL_REPORTER).run()
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = decision
        return decision
    return _Resolution(facts, policy, reporter).run()


def apply_implications(facts: Facts, policy: Policy, reporter: BaseReporter = _NULL_REPORTER) -> Facts:
    """Set unknown facts that follow from known ones, to a fixpoint; known facts never change
    (see :func:`kernelpolicy.semantics.imply`)."""
    return imply(facts, policy.implications, reporter)


class _Resolution:
    """The state of one resolution: the facts, every rule's applicability, and the trace."""

    def __init__(self, facts: Facts, policy: Policy, reporter: BaseReporter) -> None:
        self.policy = policy
        self.reporter = reporter
        self.facts = apply_implications(facts, policy, reporter)
        self.typed = self.facts.typed()
        self.when: dict[str, bool | None] = {}
        for r in policy.rules:
            until = evaluate(r.until, self.typed) if r.until is not None else None
            self.when[r.id] = rule_state(evaluate(r.when, self.typed), until)
        self.assumptions: list[Assumption] = []
        self.overrides: list[Override] = []
        self.warnings: list[str] = []

    def run(self) -> Decision:
        self.reporter.starting(self.facts)
        picks = self._explicit_picks()
        paths = {path: self._path(path, picks.get(path)) for path in DECIDED_PATHS}
        paths["warmup"] = self._warmup(paths)
        uniq: dict[tuple[str, str], Assumption] = {}
        for a in self.assumptions:
            uniq.setdefault((a.fact, a.rule), a)
        decision = Decision(
            facts=self.facts,
            paths=paths,
            policy_digest=self.policy.digest,
            overrides=tuple(self.overrides),
            warnings=tuple(dict.fromkeys(self.warnings)),
            assumptions=tuple(uniq.values()),
            engine={name: engine_flags(paths, m) for name, m in self.policy.engines.items()},
        )
        self.reporter.ending(decision)
        return decision

    # -- explicit choices

    def _explicit_picks(self) -> dict[str, _Pick]:
        """The explicit backend choice per path (warnings about choices that lost are kept)."""
        allowed = tuple(self.facts.get("deploy.allow_rules", ()) or ())
        by_path: dict[str, list[_Pick]] = {}
        for key, path, flag in (
            ("deploy.moe_backend", "moe", "--moe-backend"),
            ("deploy.linear_backend", "dense", "--linear-backend"),
        ):
            b = self.facts.get(key)
            if b is not None:
                by_path.setdefault(path, []).append(_Pick(str(b), f"{flag} {b}", allowed, "user"))
        for r in self.policy.rules:
            if r.kind != "use" or self.when[r.id] is not True:
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
                by_path.setdefault(path, []).append(_Pick(r.backends[0], source, named, r.layer))
        return {path: self._one_pick(path, options) for path, options in by_path.items()}

    def _one_pick(self, path: str, options: list[_Pick]) -> _Pick:
        for layer in ("user", "policy"):
            mine = [o for o in options if o.layer == layer]
            if len({o.backend for o in mine}) > 1:
                raise ContradictionError(
                    path,
                    tuple(o.source for o in mine),
                    " and ".join(f"`{o.source}` asks for `{o.backend}`" for o in mine),
                )
        best = next(o for layer in ("user", "policy") for o in options if o.layer == layer)
        for o in options:
            if o.backend != best.backend:
                self.warnings.append(f"`{best.source}` wins over policy `{o.source}` on path `{path}`")
        return best

    def _user_denier(self, backend: str, path: str) -> Rule | None:
        """The deployment's own setting that denies *backend* on *path*, if one applies."""
        for r in self.policy.rules_for(backend, path):
            if r.kind == "deny" and r.layer == "user" and self.when[r.id] is True:
                return r
        return None

    # -- one path

    def _path(self, path: str, pick: _Pick | None) -> PathDecision:
        if path in ("moe", "router") and self.facts.get("model.is_moe") is False:
            self.reporter.ending_path(path, None)
            return PathDecision(path, None, reason="the model has no MoE layers", present=False)
        order = self._order(path)
        if pick is not None:
            if pick.backend not in self.policy.backends[path]:
                raise ContradictionError(
                    path,
                    (pick.source,),
                    f"`{pick.source}`: `{pick.backend}` is not a backend of this path",
                )
            order = [pick.backend] + [b for b in order if b != pick.backend]
        self.reporter.starting_path(path, tuple(order))
        cands, chosen, deciding = _PathJudge(self, path, pick).decide(order)
        explicit_won = pick is not None and chosen == pick.backend
        self.reporter.ending_path(path, chosen)
        return PathDecision(
            path,
            chosen,
            tuple(cands),
            rule=pick.source if explicit_won and pick is not None else (deciding[0] if deciding else None),
            rules=deciding,
            reason=None if chosen else self._no_backend_reason(path),
            explicit=pick.source if pick is not None else None,
        )

    def _no_backend_reason(self, path: str) -> str:
        for u in self.policy.unsupported:
            if path in u.paths and evaluate(u.when, self.typed) is True:
                return f"known unsupported (`{u.id}`, {u.origin}): {u.because}" + (f"; {u.help}" if u.help else "")
        return f"no backend of path `{path}` is valid for these facts"

    def _order(self, path: str) -> list[str]:
        catalog = list(self.policy.backends[path])
        base: list[str] | None = None
        for layer in ("policy", "shipped"):
            for o in self.policy.orders.get(path, ()):
                if o.origin.layer == layer and evaluate(o.when, self.typed) is True:
                    base = list(o.backends)
                    break
            if base is not None:
                break
        order = base or []
        order += [b for b in catalog if b not in order]
        for layer in ("shipped", "policy"):
            # within a layer, by id: the outcome never depends on file or rule order (two
            # conflicting `prefer` rules of one layer are a `contradiction` for `kernelpolicy check`)
            for r in sorted(self.policy.rules, key=lambda r: r.id):
                if r.kind == "prefer" and r.layer == layer and r.applies_to(path) and self.when[r.id] is True:
                    front = [b for b in r.backends if b in order]
                    order = front + [b for b in order if b not in front]
        return order

    # -- warmup, derived from the other paths

    def _warmup(self, paths: Mapping[str, PathDecision]) -> PathDecision:
        kernels: list[str] = []
        cands: list[Candidate] = []
        for path in DECIDED_PATHS:
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
        return bool(r.paths) and "warmup" in (r.paths or ()) and applies(r.kind, r.severity, self.when[r.id])


class _PathJudge:
    """Judges one path's candidates in order; the first nothing rejects is chosen."""

    def __init__(self, res: _Resolution, path: str, pick: _Pick | None) -> None:
        self.res = res
        self.path = path
        self.pick = pick
        self.chosen: str | None = None
        self.deciding: list[str] = []

    def decide(self, order: list[str]) -> tuple[list[Candidate], str | None, tuple[str, ...]]:
        cands: list[Candidate] = []
        for b in order:
            mine: list[Assumption] = []
            explicit = self.pick is not None and b == self.pick.backend
            rejections = self.rejections(b, mine, explicit)
            if explicit:
                cand = self._explicit(b, rejections)
            elif rejections:
                if any(not x.assumed for x in rejections):
                    mine = []  # rejected on known facts: nothing it assumed changed the outcome
                cand = _rejected(b, rejections, mine)
                if self.chosen is None and not any(x.severity == "catalog" for x in rejections):
                    self.deciding.append(rejections[0].rule)
            elif self.chosen is None:
                cand = Candidate(b, "chosen", assumptions=tuple(dict.fromkeys(a.fact for a in mine)))
                self.chosen = b
            else:
                cand = Candidate(b, "viable")
            if self.chosen is None or self.chosen == b:
                self.res.assumptions += mine  # only what shaped the outcome: candidates up to the chosen one
            cands.append(cand)
            self.res.reporter.judging(self.path, cand)
        return cands, self.chosen, tuple(dict.fromkeys(self.deciding))

    def _explicit(self, b: str, rejections: list[_Rejection]) -> Candidate:
        """The explicitly chosen backend: chosen unless a rule it may not override rejects it."""
        assert self.pick is not None
        pick, path, res = self.pick, self.path, self.res
        ids = tuple(dict.fromkeys(x.rule for x in rejections))
        refs = tuple(dict.fromkeys(ref for x in rejections for ref in x.refs))
        denier = next((x.rule for x in rejections if x.severity == "user"), None)
        if denier is not None:
            why = f"`{pick.source}` chooses `{b}`, which `{denier}` denies"
            raise ContradictionError(path, (pick.source, denier), why)
        blocking = [x for x in rejections if not can_override(x.severity, x.rule, pick.overrides)]
        if blocking:
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

    def rejections(self, backend: str, assumptions: list[Assumption], explicit: bool) -> list[_Rejection]:
        """Every reason *backend* cannot run on the path, known facts first, gravest first.

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
        tv = evaluate(entry.requires, typed)
        if not met(tv):
            why = describe_failure(entry.requires, typed)
            out.append(_Rejection(entry.rule_id, "catalog", f"needs {why}", entry.refs, False))
            if not explicit:  # it cannot run here at all: no other rule needs a say
                return out
        elif tv is None:
            for t in failing_tests(entry.requires, typed)[1]:
                why = f"assumed `{backend}` on `{path}` has {t.describe()}"
                assumptions.append(Assumption(t.key, entry.rule_id, why))
        for r in res.policy.rules_for(backend, path):
            x = self._rejection(r, backend, assumptions)
            if x is not None:
                out.append(x)
        out.sort(key=lambda x: (x.assumed, gravity(x.severity)))
        return out

    def _rejection(self, r: Rule, backend: str, assumptions: list[Assumption]) -> _Rejection | None:
        typed = self.res.typed
        w = self.res.when[r.id]
        if not applies(r.kind, r.severity, w):
            return None
        if r.kind == "deny":
            if w is None:
                for k in sorted({t.key for t in failing_tests(r.when, typed)[1]}):
                    why = f"crash rule applied: `{backend}` denied while `{k}` is unknown"
                    assumptions.append(Assumption(k, r.id, why))
            return _Rejection(r.id, r.severity, r.because, r.refs, w is None)
        rv = evaluate(r.require, typed)
        if rv is None:
            for t in failing_tests(r.require, typed)[1]:
                assumptions.append(Assumption(t.key, r.id, f"assumed {t.describe()} for `{backend}`"))
        if met(rv):
            return None
        why = describe_failure(r.require, typed)
        return _Rejection(r.id, r.severity, f"{r.because} (needs {why})", r.refs, False)


def _rejected(b: str, rejections: list[_Rejection], assumed: list[Assumption]) -> Candidate:
    return Candidate(
        b,
        "rejected",
        tuple(dict.fromkeys(x.rule for x in rejections)),
        rejections[0].reason,
        rejections[0].severity,
        tuple(dict.fromkeys(ref for x in rejections for ref in x.refs)),
        assumptions=tuple(dict.fromkeys(a.fact for a in assumed)),
    )
