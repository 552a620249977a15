"""The Decision: one backend per path, the derived warmup, and the trace that explains them.

A :class:`Decision` is immutable. :meth:`Decision.to_dict` is the JSON contract of docs/design.md
(``schema: kernelpolicy.decision/1``); :attr:`Decision.fingerprint` identifies the facts, the
policy and the choices, so ranks of one deployment can compare decisions cheaply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar, overload

from ._version import __version__
from .facts.keys import DECIDED_PATHS, PATHS
from .facts.record import Facts

if TYPE_CHECKING:
    from .policy import Policy

__all__ = [
    "SCHEMA",
    "Assumption",
    "Candidate",
    "Decision",
    "Override",
    "PathDecision",
    "Verdict",
    "acted_rules",
    "origins_of",
    "rule_origin",
    "with_provenance",
]

SCHEMA = "kernelpolicy.decision/1"
#: Facts that describe and decide nothing, left out of :attr:`Decision.fingerprint`.
_UNHASHED: Final = frozenset({"gpu.name"})
Verdict = Literal["chosen", "rejected", "viable", "refused"]

_T = TypeVar("_T")


class _Deferred(Generic[_T]):
    """A dataclass field given either its value or a function that computes it, called on
    first read and then kept: the resolver hands the explanation over unbuilt, and whoever
    reads it (``explain``, the JSON, equality) sees the same value an eager build gives."""

    def __init__(self, default: _T | _Later[_T]) -> None:
        self.default = default
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _T: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> _T: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> _T:
        if obj is None:
            return self.default  # type: ignore[return-value]  # the default, as dataclasses read it
        value = obj.__dict__[self.slot]
        if isinstance(value, _Later):
            value = value.compute()
            obj.__dict__[self.slot] = value
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: _T | _Later[_T]) -> None:
        obj.__dict__[self.slot] = value


@dataclass(frozen=True)
class _Later(Generic[_T]):
    """A value to compute when first read (see :class:`_Deferred`)."""

    compute: Callable[[], _T]

    def __reduce__(self) -> tuple[Callable[[_T], _T], tuple[_T]]:
        return _ready, (self.compute(),)  # pickled and copied as the value itself


def _ready(value: _T) -> _T:
    return value


@dataclass(frozen=True)
class Candidate:
    """One backend considered for a path, and what became of it."""

    backend: str
    verdict: Verdict
    rules: tuple[str, ...] = ()  #: the rules that rejected (or were overridden for) it
    #: why it was rejected (worded when first read: the exhaustive walk never reads most)
    reason: _Deferred[str | None] = _Deferred(None)
    severity: str | None = None  #: the gravest severity among ``rules``
    refs: tuple[str, ...] = ()
    overridden: tuple[str, ...] = ()  #: rules an explicit choice overrode to choose it
    assumptions: tuple[str, ...] = ()  #: unknown facts this verdict rests on

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.backend, "verdict": self.verdict}
        if self.rules:
            out["rules"] = list(self.rules)
        if self.reason:
            out["reason"] = self.reason
        if self.severity:
            out["severity"] = self.severity
        if self.refs:
            out["refs"] = list(self.refs)
        if self.overridden:
            out["overridden"] = list(self.overridden)
        if self.assumptions:
            out["assumptions"] = list(self.assumptions)
        return out


@dataclass(frozen=True)
class PathDecision:
    """The outcome on one path."""

    path: str
    backend: str | None
    candidates: _Deferred[tuple[Candidate, ...]] = _Deferred(())
    rule: str | None = None  #: the rule that decided, when the first candidate was not taken
    rules: tuple[str, ...] = ()  #: every rule that rejected a candidate ranked above the chosen one
    reason: str | None = None  #: why there is no backend (``backend is None``)
    explicit: str | None = None  #: where an explicit choice for this path came from
    kernels: tuple[str, ...] | None = None  #: ``warmup`` only: the kernels to warm
    present: bool = True  #: False when the model has no such path (no MoE layers, say)
    #: the ``prefer`` rules that reordered the path's candidates (in the order they applied)
    preferred_by: tuple[str, ...] = ()

    @property
    def applicable(self) -> bool:
        """False when the model has no such path (no MoE layers, say)."""
        return self.present

    @property
    def explicit_refused(self) -> bool:
        """An explicit choice was made for this path and refused (a crash rule or a requirement
        it may not override): the backend is another one."""
        return self.explicit is not None and any(c.verdict == "refused" for c in self.candidates)

    def rejection(self, backend: str) -> str | None:
        """Why the decision rejects *backend* on this path (its first rule and reason), else None."""
        for c in self.candidates:
            if c.backend == backend and c.verdict in ("rejected", "refused"):
                return f"the decision rejects `{backend}` ({c.rules[0] if c.rules else '?'}: {c.reason})"
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.kernels is not None:
            out["kernels"] = list(self.kernels)
        else:
            out["backend"] = self.backend
        if self.rule:
            out["rule"] = self.rule
        if self.rules:
            out["rules"] = list(self.rules)
        if self.reason:
            out["reason"] = self.reason
        if self.explicit:
            out["explicit"] = self.explicit
            if self.explicit_refused:
                out["explicit_refused"] = True
        if self.preferred_by:
            out["preferred_by"] = list(self.preferred_by)
        out["candidates"] = [c.to_dict() for c in self.candidates]
        return out


@dataclass(frozen=True)
class Override:
    """An explicit choice that overrode (or was refused by) rules."""

    path: str
    backend: str
    source: str  #: ``--moe-backend``, ``VLLM_USE_DEEP_GEMM=1``, a policy rule id
    rules: tuple[str, ...]
    accepted: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "backend": self.backend,
            "source": self.source,
            "rules": list(self.rules),
            "accepted": self.accepted,
        }


@dataclass(frozen=True)
class Assumption:
    """An unknown fact a verdict rests on, and the fact that would settle it."""

    fact: str
    rule: str
    effect: str  #: what was assumed, in words

    def to_dict(self) -> dict[str, str]:
        return {"fact": self.fact, "rule": self.rule, "effect": self.effect}

    def __str__(self) -> str:
        return f"`{self.fact}` unknown: {self.effect} (rule `{self.rule}`)"


@dataclass(frozen=True)
class Decision:
    """The one decision for every path of a deployment."""

    facts: Facts
    paths: Mapping[str, PathDecision]
    policy_digest: str
    overrides: tuple[Override, ...] = ()
    warnings: tuple[str, ...] = ()
    assumptions: _Deferred[tuple[Assumption, ...]] = _Deferred(())
    engine: _Deferred[Mapping[str, Mapping[str, Any]]] = _Deferred(_Later(dict))
    model: str | None = None  #: the model as the user gave it (an id or a path), when known
    origins: Mapping[str, str] = field(default_factory=dict)  #: rule id -> ``file:line``, every rule that acted

    @property
    def warmup(self) -> tuple[str, ...]:
        """The JIT kernels to warm, as ``<backend>.<path>``."""
        return self.paths["warmup"].kernels or ()

    @property
    def ok(self) -> bool:
        """Every path the model has got a backend."""
        return all(p.backend is not None for name, p in self.paths.items() if name != "warmup" and p.applicable)

    @property
    def refused(self) -> tuple[Override, ...]:
        """The explicit choices the decision refused (their paths run another backend)."""
        return tuple(o for o in self.overrides if not o.accepted)

    @property
    def fingerprint(self) -> str:
        """``sha256:`` of the facts, the policy digest and every path's outcome.

        ``gpu.name`` is left out: it only describes the GPU whose ``gpu.*`` facts are hashed,
        so one GPU named ``H100``, ``NVIDIA H100 80GB HBM3`` or ``sm90`` gives one fingerprint."""
        cached: str | None = self.__dict__.get("_fp")
        if cached is None:
            facts = {k: v for k, v in self.facts.to_json_dict().items() if k not in _UNHASHED}
            core = {
                "facts": facts,
                "policy": self.policy_digest,
                "paths": {k: v.kernels if v.kernels is not None else v.backend for k, v in sorted(self.paths.items())},
            }
            blob = json.dumps(core, sort_keys=True, separators=(",", ":"), default=list)
            cached = "sha256:" + hashlib.sha256(blob.encode()).hexdigest()
            object.__setattr__(self, "_fp", cached)
        return cached

    def to_dict(self) -> dict[str, Any]:
        """The decision as JSON-ready data (the ``kernelpolicy.decision/1`` schema)."""
        return {
            "schema": SCHEMA,
            "kernelpolicy": __version__,
            "model": self.model,
            "fingerprint": self.fingerprint,
            "facts": self.facts.to_json_dict(),
            "sources": dict(sorted(self.facts.sources.items())),
            "paths": {name: self.paths[name].to_dict() for name in PATHS},
            "overrides": [o.to_dict() for o in self.overrides],
            "warnings": list(self.warnings),
            "assumptions": [a.to_dict() for a in self.assumptions],
            "engine": {k: dict(v) for k, v in self.engine.items()},
            "policy": self.policy_digest,
            "origins": dict(sorted(self.origins.items())),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def summary(self) -> str:
        """One line: each path's backend, deciding rule and reordering ``prefer`` rules, and the fingerprint."""
        parts = []
        for name in DECIDED_PATHS:
            p = self.paths[name]
            if not p.applicable:
                continue
            why = [p.rule] if p.rule else []
            if not (p.explicit and p.rule == p.explicit):
                why += [f"prefer {r}" for r in p.preferred_by]
            parts.append(f"{name}={p.backend or 'NONE'}" + (f" ({', '.join(why)})" if why else ""))
        parts.append("warmup=" + (",".join(self.warmup) or "none"))
        return " ".join(parts) + f" fingerprint={self.fingerprint[:19]}"


def rule_origin(policy: Policy, rule: str) -> str | None:
    """``file:line`` of a rule, a catalog requirement (``catalog.PATH.BACKEND``), an order or an
    implication of *policy*; ``None`` for ids that are not written in a file (``--moe-backend``)."""
    r = policy.by_id.get(rule)
    if r is not None:
        return str(r.origin)
    if rule.startswith("catalog."):
        _, path, backend = [*rule.split(".", 2), "", ""][:3]
        entry = policy.backends.get(path, {}).get(backend)
        return str(entry.origin) if entry else None
    for imp in policy.implications:
        if imp.id == rule:
            return str(imp.origin)
    for orders in policy.orders.values():
        for o in orders:
            if o.id == rule:
                return str(o.origin)
    return None


def acted_rules(
    paths: Mapping[str, PathDecision], overrides: Sequence[Override], assumptions: Sequence[Assumption], facts: Facts
) -> list[str]:
    """Every rule id that acted on a decision: rejected or overrode a candidate, decided a path,
    was overridden or refused an override, rests on an assumption, or implied a fact."""
    ids: list[str] = []
    for p in paths.values():
        ids += [r for r in (p.rule,) if r]
        ids += list(p.rules) + list(p.preferred_by)
        for c in p.candidates:
            ids += list(c.rules) + list(c.overridden)
    for o in overrides:
        ids += list(o.rules)
    ids += [a.rule for a in assumptions]
    ids += [s.split(":", 1)[1] for s in facts.sources.values() if s.startswith("implied:")]
    return list(dict.fromkeys(ids))


def origins_of(policy: Policy, ids: Sequence[str]) -> dict[str, str]:
    """``{rule id: file:line}`` for the ids of *ids* that are written in a file of *policy*."""
    out: dict[str, str] = {}
    for rid in ids:
        where = rule_origin(policy, rid)
        if where is not None:
            out[rid] = where
    return out


def with_provenance(decision: Decision, policy: Policy, model: str | None = None) -> Decision:
    """*decision* carrying the model as given and the ``file:line`` of every rule that acted
    (what ``explain --json`` prints; the fingerprint does not change)."""
    ids = acted_rules(decision.paths, decision.overrides, decision.assumptions, decision.facts)
    return replace(decision, model=model, origins=origins_of(policy, ids))
