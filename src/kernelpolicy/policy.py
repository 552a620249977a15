"""A loaded, validated and indexed set of rules: what the resolver reads.

Build one with :func:`kernelpolicy.load_policy`. Every element keeps its :class:`Origin` (file,
line, layer), so a decision can say where each rule that shaped it was written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .dsl.conditions import TRUE, Condition
from .errors import Diagnostic
from .facts.gpu import GpuProduct
from .facts.model import CatalogModel

__all__ = [
    "LAYERS",
    "Backend",
    "EngineMap",
    "FixEvidence",
    "Implication",
    "Layer",
    "Order",
    "Origin",
    "Policy",
    "Rule",
    "Unsupported",
]

Layer = Literal["shipped", "policy", "user"]
#: Layers from least to most authoritative.
LAYERS: tuple[Layer, ...] = ("shipped", "policy", "user")
RuleKind = Literal["deny", "prefer", "require", "use"]


@dataclass(frozen=True)
class Origin:
    file: str
    line: int
    layer: Layer

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class Backend:
    """A backend on one path and what it needs (a catalog entry)."""

    id: str
    path: str
    requires: Condition
    warmup: bool
    because: str | None
    refs: tuple[str, ...]
    origin: Origin
    auto: bool = True  #: false: never chosen unless a deployment asks for it explicitly

    @property
    def rule_id(self) -> str:
        """The id under which the catalog requirement appears in a decision."""
        return f"catalog.{self.path}.{self.id}"


@dataclass(frozen=True)
class Order:
    """The default priority of a path's backends where ``when`` holds."""

    id: str
    path: str
    when: Condition
    backends: tuple[str, ...]
    origin: Origin


@dataclass(frozen=True)
class FixEvidence:
    """How a rule's cited fix shows in a released package (a rule's ``fix``)."""

    package: str
    file: str
    kind: Literal["contains", "matches", "symbol"]
    pattern: str

    @property
    def key(self) -> str:
        """One line naming the evidence (the scanned table is keyed by it)."""
        return f"{self.package}:{self.file}:{self.kind}:{self.pattern}"


@dataclass(frozen=True)
class Rule:
    """One rule: an effect on backends where ``when`` holds, until ``until`` holds."""

    id: str
    kind: RuleKind
    when: Condition
    backends: tuple[str, ...]
    paths: tuple[str, ...] | None  #: ``None``: every path the backends exist on
    severity: str  #: crash, accuracy, perf, support; ``user`` for explicit user choices
    because: str
    origin: Origin
    require: Condition = TRUE
    help: str | None = None
    refs: tuple[str, ...] = ()
    until: Condition | None = None
    overrides: tuple[str, ...] = ()
    #: how its cited fix shows in released code: the alternatives, any of which shows it (one package)
    fix: tuple[FixEvidence, ...] | None = None

    @property
    def layer(self) -> Layer:
        return self.origin.layer

    def applies_to(self, path: str) -> bool:
        return self.paths is None or path in self.paths


@dataclass(frozen=True)
class Implication:
    id: str
    when: Condition
    sets: Mapping[str, Any]
    because: str | None
    refs: tuple[str, ...]
    origin: Origin
    unless: Condition | None = None  #: blocks the implication only when it holds


@dataclass(frozen=True)
class Unsupported:
    """Deployments where *paths* knowingly have no valid backend: no kernel exists for them.

    Without ``refuse`` the entry only declares what the rules already decide (``check`` warns
    when they give a backend there after all); with it the entry decides: where its ``when``
    holds, every backend of its paths is out (an engine that refuses the deployment whatever the
    kernel, such as a checkpoint format it cannot load).
    """

    id: str
    when: Condition
    paths: tuple[str, ...]
    because: str
    origin: Origin
    help: str | None = None
    refs: tuple[str, ...] = ()
    refuse: bool = False


@dataclass(frozen=True)
class EngineMap:
    """An engine's names for kernelpolicy's backends and how its flags read as choices."""

    name: str
    plugin: str | None
    aliases: Mapping[str, Mapping[str, str]]
    moe_flag: Mapping[str, str]
    dense_kernels: Mapping[str, tuple[str, ...]]
    origin: Origin
    #: ``quant.moe_scheme`` -> kernelpolicy id -> the MoE flag value for that scheme
    moe_flag_by_scheme: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: kernelpolicy dense id -> the environment that selects it where no flag value does
    dense_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def moe_flag_for(self, backend: str, scheme: object = None) -> str | None:
        """The engine's MoE flag value of *backend* for experts quantized as *scheme*."""
        by_scheme = self.moe_flag_by_scheme.get(str(scheme)) if scheme is not None else None
        if by_scheme is not None and backend in by_scheme:
            return by_scheme[backend]
        return self.moe_flag.get(backend)


@dataclass(frozen=True, eq=False)
class Policy:
    """Everything the resolver needs, indexed for fast lookup."""

    backends: Mapping[str, Mapping[str, Backend]]  #: path -> backend id -> entry (catalog order)
    orders: Mapping[str, tuple[Order, ...]]
    rules: tuple[Rule, ...]
    implications: tuple[Implication, ...]
    models: tuple[CatalogModel, ...]
    gpus: tuple[GpuProduct, ...]
    engines: Mapping[str, EngineMap]
    files: tuple[str, ...]
    digest: str  #: hash of every file's content, in load order
    warnings: tuple[Diagnostic, ...] = ()
    by_id: Mapping[str, Rule] = field(default_factory=dict)
    unsupported: tuple[Unsupported, ...] = ()

    def rules_for(self, backend: str, path: str) -> tuple[Rule, ...]:
        """The deny and require rules that target *backend* on *path*."""
        return self._index.get((backend, path), ())

    @property
    def _index(self) -> dict[tuple[str, str], tuple[Rule, ...]]:
        cached: dict[tuple[str, str], tuple[Rule, ...]] | None = self.__dict__.get("_idx")
        if cached is None:
            idx: dict[tuple[str, str], list[Rule]] = {}
            for r in self.rules:
                if r.kind not in ("deny", "require"):
                    continue
                for b in r.backends:
                    for path, entries in self.backends.items():
                        if b in entries and r.applies_to(path):
                            idx.setdefault((b, path), []).append(r)
                    if r.paths and "warmup" in r.paths:
                        idx.setdefault((b, "warmup"), []).append(r)
            cached = {k: tuple(v) for k, v in idx.items()}
            object.__setattr__(self, "_idx", cached)
        return cached
