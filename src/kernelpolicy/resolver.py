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
from typing import Any, Final

from .decision import Assumption, Candidate, Decision, Override, PathDecision
from .dsl.conditions import describe_failure, evaluate, failing_tests
from .engines import engine_flags
from .errors import KernelPolicyError
from .facts._record import Facts, typed_value
from .policy import Policy, Rule
from .reporters import BaseReporter

__all__ = ["ContradictionError", "apply_implications", "resolve"]

DECIDED_PATHS: Final = ("dense", "moe", "router")
_GRAVITY: Final = {"user": 0, "catalog": 1, "crash": 2, "accuracy": 3, "support": 4, "perf": 5}
_OVERRIDABLE: Final = frozenset({"accuracy", "perf", "support"})
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
    fingerprint. Results are cached per policy and facts when no *reporter* is given.

    :raises ContradictionError: when explicit choices contradict each other.
    """
    if reporter is None:
        key = (id(policy), facts)
        hit = _cache.get(key)
        if hit is not None and hit.policy_digest == policy.digest:
            return hit
        decision = _resolve(facts, policy, _NULL_REPORTER)
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = decision
        return decision
    return _resolve(facts, policy, reporter)


def apply_implications(facts: Facts, policy: Policy, reporter: BaseReporter = _NULL_REPORTER) -> Facts:
    """Set unknown facts that follow from known ones, to a fixpoint; known facts never change."""
    if not policy.implications:
        return facts
    typed = dict(facts.typed())
    added: dict[str, Any] = {}
    sources: dict[str, str] = {}
    changed = True
    rounds = 0
    while changed and rounds <= len(policy.implications):
        changed = False
        rounds += 1
        for imp in policy.implications:
            if evaluate(imp.when, typed) is not True:
                continue
            if imp.unless is not None and evaluate(imp.unless, typed) is True:
                continue
            for k, v in imp.sets.items():
                if k not in typed:
                    added[k] = v
                    typed[k] = typed_value(k, v)
                    sources[k] = f"implied:{imp.id}"
                    reporter.implying(imp.id, k, v)
                    changed = True
    if not added:
        return facts
    # the values were normalised when the implication was loaded: no need to validate again
    return Facts.model_construct(values={**facts.values, **added}, sources={**facts.sources, **sources})


def _explicit_picks(
    facts: Facts, policy: Policy, when: Mapping[str, bool | None]
) -> tuple[dict[str, _Pick], list[str]]:
    """The explicit backend choice per path, and warnings about choices that lost."""
    allowed = tuple(facts.get("deploy.allow_rules", ()) or ())
    by_path: dict[str, list[_Pick]] = {}
    for key, path, flag in (
        ("deploy.moe_backend", "moe", "--moe-backend"),
        ("deploy.linear_backend", "dense", "--linear-backend"),
    ):
        b = facts.get(key)
        if b is not None:
            by_path.setdefault(path, []).append(_Pick(str(b), f"{flag} {b}", allowed, "user"))
    for r in policy.rules:
        if r.kind != "use" or when[r.id] is not True:
            continue
        source = r.id if r.layer == "policy" else r.id.split(".env.", 1)[-1]
        for path in r.paths or [p for p in DECIDED_PATHS if r.backends[0] in policy.backends.get(p, {})]:
            if r.layer == "user" and _user_denies(policy, when, r.backends[0], path):
                continue  # a narrower user setting (VLLM_MOE_USE_DEEP_GEMM=0) wins over a broad one
            by_path.setdefault(path, []).append(
                _Pick(
                    r.backends[0],
                    source,
                    r.overrides + (allowed if r.layer == "user" else ()),
                    r.layer,
                )
            )
    picks: dict[str, _Pick] = {}
    warnings: list[str] = []
    for path, options in by_path.items():
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
                warnings.append(f"`{best.source}` wins over policy `{o.source}` on path `{path}`")
        picks[path] = best
    return picks, warnings


def _user_denies(policy: Policy, when: Mapping[str, bool | None], backend: str, path: str) -> bool:
    return any(r.kind == "deny" and r.layer == "user" and when[r.id] is True for r in policy.rules_for(backend, path))


def _order(path: str, policy: Policy, typed: Mapping[str, Any], when: Mapping[str, bool | None]) -> list[str]:
    catalog = list(policy.backends[path])
    base: list[str] | None = None
    for layer in ("policy", "shipped"):
        for o in policy.orders.get(path, ()):
            if o.origin.layer == layer and evaluate(o.when, typed) is True:
                base = list(o.backends)
                break
        if base is not None:
            break
    order = base or []
    order += [b for b in catalog if b not in order]
    for layer in ("shipped", "policy"):
        # within a layer, by id: the outcome never depends on file or rule order (two
        # conflicting `prefer` rules of one layer are a `contradiction` for `kernelpolicy check`)
        for r in sorted(policy.rules, key=lambda r: r.id):
            if r.kind == "prefer" and r.layer == layer and r.applies_to(path) and when[r.id] is True:
                front = [b for b in r.backends if b in order]
                order = front + [b for b in order if b not in front]
    return order


def _judge(
    backend: str,
    path: str,
    policy: Policy,
    typed: Mapping[str, Any],
    when: Mapping[str, bool | None],
    assumptions: list[Assumption],
    explicit: bool = False,
) -> list[_Rejection]:
    """Every reason *backend* cannot run on *path*, known facts first, gravest first.

    A backend whose catalog requirement fails is rejected for that reason alone.
    """
    out: list[_Rejection] = []
    entry = policy.backends[path][backend]
    if not entry.auto and not explicit:
        why = "chosen only when the deployment asks for it explicitly"
        out.append(_Rejection(entry.rule_id, "catalog", why, entry.refs, False))
        return out
    tv = evaluate(entry.requires, typed)
    if tv is False:
        why = describe_failure(entry.requires, typed)
        out.append(_Rejection(entry.rule_id, "catalog", f"needs {why}", entry.refs, False))
        if not explicit:  # it cannot run here at all: no other rule needs a say
            return out
    elif tv is None:
        for t in failing_tests(entry.requires, typed)[1]:
            assumptions.append(Assumption(t.key, entry.rule_id, f"assumed `{backend}` on `{path}` has {t.describe()}"))
    for r in policy.rules_for(backend, path):
        w = when[r.id]
        if w is False or (w is None and r.severity != "crash"):
            continue
        if r.kind == "deny":
            if w is None:
                keys = sorted({t.key for t in failing_tests(r.when, typed)[1]})
                for k in keys:
                    assumptions.append(
                        Assumption(
                            k,
                            r.id,
                            f"crash rule applied: `{backend}` denied while `{k}` is unknown",
                        )
                    )
            out.append(_Rejection(r.id, r.severity, r.because, r.refs, w is None))
            continue
        rv = evaluate(r.require, typed)
        if rv is True:
            continue
        if rv is None:
            for t in failing_tests(r.require, typed)[1]:
                assumptions.append(Assumption(t.key, r.id, f"assumed {t.describe()} for `{backend}`"))
            continue
        why = describe_failure(r.require, typed)
        out.append(_Rejection(r.id, r.severity, f"{r.because} (needs {why})", r.refs, False))
    out.sort(key=lambda x: (x.assumed, _GRAVITY.get(x.severity, 9)))
    return out


def _resolve(facts: Facts, policy: Policy, reporter: BaseReporter) -> Decision:
    facts = apply_implications(facts, policy, reporter)
    typed = facts.typed()
    reporter.starting(facts)
    when: dict[str, bool | None] = {}
    for r in policy.rules:
        retired = r.until is not None and evaluate(r.until, typed) is True
        when[r.id] = False if retired else evaluate(r.when, typed)
    picks, warnings = _explicit_picks(facts, policy, when)
    assumptions: list[Assumption] = []
    overrides: list[Override] = []
    paths: dict[str, PathDecision] = {}
    is_moe = facts.get("model.is_moe")

    for path in DECIDED_PATHS:
        if path in ("moe", "router") and is_moe is False:
            paths[path] = PathDecision(path, None, reason="the model has no MoE layers", present=False)
            reporter.ending_path(path, None)
            continue
        pick = picks.get(path)
        order = _order(path, policy, typed, when)
        if pick is not None:
            if pick.backend not in policy.backends[path]:
                raise ContradictionError(
                    path,
                    (pick.source,),
                    f"`{pick.source}`: `{pick.backend}` is not a backend of this path",
                )
            order = [pick.backend] + [b for b in order if b != pick.backend]
        reporter.starting_path(path, tuple(order))
        cands, chosen, deciding = _decide_path(
            path, order, pick, policy, typed, when, assumptions, overrides, warnings, reporter
        )
        explicit_won = pick is not None and chosen == pick.backend
        paths[path] = PathDecision(
            path,
            chosen,
            tuple(cands),
            rule=pick.source if explicit_won and pick is not None else (deciding[0] if deciding else None),
            rules=deciding,
            reason=None if chosen else f"no backend of path `{path}` is valid for these facts",
            explicit=pick.source if pick is not None else None,
        )
        reporter.ending_path(path, chosen)

    paths["warmup"] = _warmup(paths, policy, when)
    seen: set[tuple[str, str]] = set()
    uniq: list[Assumption] = []
    for a in assumptions:
        if (a.fact, a.rule) not in seen:
            seen.add((a.fact, a.rule))
            uniq.append(a)
    decision = Decision(
        facts=facts,
        paths=paths,
        policy_digest=policy.digest,
        overrides=tuple(overrides),
        warnings=tuple(dict.fromkeys(warnings)),
        assumptions=tuple(uniq),
        engine={name: engine_flags(paths, m) for name, m in policy.engines.items()},
    )
    reporter.ending(decision)
    return decision


def _decide_path(
    path: str,
    order: list[str],
    pick: _Pick | None,
    policy: Policy,
    typed: Mapping[str, Any],
    when: Mapping[str, bool | None],
    assumptions: list[Assumption],
    overrides: list[Override],
    warnings: list[str],
    reporter: BaseReporter,
) -> tuple[list[Candidate], str | None, tuple[str, ...]]:
    """Judge *order*'s candidates; returns them, the chosen backend and the deciding rule."""
    cands: list[Candidate] = []
    chosen: str | None = None
    deciding: list[str] = []
    for b in order:
        mine: list[Assumption] = []
        rejections = _judge(b, path, policy, typed, when, mine, pick is not None and b == pick.backend)
        ids = tuple(dict.fromkeys(x.rule for x in rejections))
        refs = tuple(dict.fromkeys(ref for x in rejections for ref in x.refs))
        if pick is not None and b == pick.backend:
            if any(x.severity == "user" for x in rejections):
                denier = next(x.rule for x in rejections if x.severity == "user")
                raise ContradictionError(
                    path,
                    (pick.source, denier),
                    f"`{pick.source}` chooses `{b}`, which `{denier}` denies",
                )
            blocking = [x for x in rejections if x.severity not in _OVERRIDABLE and x.rule not in pick.overrides]
            if blocking:
                cand = Candidate(b, "refused", ids, blocking[0].reason, blocking[0].severity, refs)
                overrides.append(Override(path, b, pick.source, tuple(x.rule for x in blocking), False))
                warnings.append(
                    f"`{pick.source}` refused on path `{path}`: `{b}` is denied by `{blocking[0].rule}` "
                    f"({blocking[0].severity}): {blocking[0].reason}; name the rule id to override it"
                )
                deciding.append(blocking[0].rule)
            else:
                cand = Candidate(b, "chosen", (), None, None, refs, overridden=ids)
                if ids:
                    overrides.append(Override(path, b, pick.source, ids, True))
                    for x in rejections:
                        warnings.append(
                            f"`{pick.source}` overrides `{x.rule}` ({x.severity}) on path `{path}`: {x.reason}"
                        )
                chosen = b
        elif rejections:
            if any(not x.assumed for x in rejections):
                mine = []  # rejected on known facts: nothing it assumed changed the outcome
            cand = Candidate(
                b,
                "rejected",
                ids,
                rejections[0].reason,
                rejections[0].severity,
                refs,
                assumptions=tuple(dict.fromkeys(a.fact for a in mine)),
            )
            if chosen is None and not any(x.severity == "catalog" for x in rejections):
                deciding.append(rejections[0].rule)
        elif chosen is None:
            cand = Candidate(b, "chosen", assumptions=tuple(dict.fromkeys(a.fact for a in mine)))
            chosen = b
        else:
            cand = Candidate(b, "viable")
        if chosen is None or chosen == b:
            assumptions += mine  # only what shaped the outcome: candidates up to the chosen one
        cands.append(cand)
        reporter.judging(path, cand)
    return cands, chosen, tuple(dict.fromkeys(deciding))


def _applies(rule: Rule, when: bool | None) -> bool:
    """A deny applies when its condition holds, or is undecided and the rule is a crash rule."""
    return when is True or (when is None and rule.severity == "crash")


def _warmup(paths: Mapping[str, PathDecision], policy: Policy, when: Mapping[str, bool | None]) -> PathDecision:
    kernels: list[str] = []
    cands: list[Candidate] = []
    for path in DECIDED_PATHS:
        ran = paths[path].backend
        for b, entry in policy.backends[path].items():
            if not entry.warmup:
                continue
            kernel = f"{b}.{path}"
            if ran != b:
                why = f"path `{path}` runs `{ran}`" if ran else f"path `{path}` runs no backend"
                cands.append(Candidate(kernel, "rejected", reason=why))
                continue
            deny = [
                r for r in policy.rules_for(b, "warmup") if r.paths and "warmup" in r.paths and _applies(r, when[r.id])
            ]
            if deny:
                cands.append(
                    Candidate(
                        kernel,
                        "rejected",
                        tuple(r.id for r in deny),
                        deny[0].because,
                        deny[0].severity,
                    )
                )
                continue
            kernels.append(kernel)
            cands.append(Candidate(kernel, "chosen"))
    return PathDecision("warmup", None, tuple(cands), kernels=tuple(kernels))
