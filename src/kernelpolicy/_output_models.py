"""The shapes of kernelpolicy's JSON outputs, as pydantic models, for their JSON Schemas.

The outputs themselves are written by :meth:`kernelpolicy.decision.Decision.to_dict`, the
``check --json`` command and :meth:`kernelpolicy.facts.machine.MachineFacts.to_json`; these
models only describe them, and the tests validate real outputs against the schemas generated
from them (``tests/tools/test_schemas.py``), so a change on either side that breaks the
contract fails there. ``/1`` promises additive changes only: new optional fields may appear,
no field changes meaning or type or goes away (``docs/design.md``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CheckOutput", "DecisionOutput", "FactsOutput"]


class _Open(BaseModel):
    """Additive changes only: readers must ignore fields they do not know."""

    model_config = ConfigDict(extra="allow")


class CandidateOut(_Open):
    backend: str
    verdict: Literal["chosen", "rejected", "viable", "refused"]
    rules: list[str] = Field(default=[], description="the rules that rejected (or were overridden for) it")
    reason: str | None = None
    severity: Literal["crash", "accuracy", "perf", "support", "user", "catalog"] | None = None
    refs: list[str] = []
    overridden: list[str] = Field(default=[], description="rules an explicit choice overrode to choose it")
    assumptions: list[str] = Field(default=[], description="unknown facts this verdict rests on")


class PathOut(_Open):
    backend: str | None = Field(default=None, description="the chosen backend; null: none is valid")
    kernels: list[str] | None = Field(default=None, description="warmup only: the JIT kernels to warm")
    rule: str | None = Field(default=None, description="the rule that decided, when the first candidate lost")
    rules: list[str] = []
    reason: str | None = None
    explicit: str | None = Field(default=None, description="where an explicit choice for this path came from")
    explicit_refused: bool = Field(
        default=False,
        description="true: the explicit choice was refused (a crash rule or a requirement) and `backend` is another",
    )
    candidates: list[CandidateOut]


class PathsOut(_Open):
    dense: PathOut
    moe: PathOut
    router: PathOut
    warmup: PathOut


class OverrideOut(_Open):
    path: str
    backend: str
    source: str
    rules: list[str]
    accepted: bool


class AssumptionOut(_Open):
    fact: str
    rule: str
    effect: str


class DecisionOutput(_Open):
    """``kernelpolicy explain --json``: one decision for every path of a deployment."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.decision/1")

    schema_: Literal["kernelpolicy.decision/1"] = Field(alias="schema")
    kernelpolicy: str = Field(description="the kernelpolicy version that decided")
    model: str | None = Field(description="the model as the user gave it (an id or a path)")
    fingerprint: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    facts: dict[str, Any]
    sources: dict[str, str] = Field(description="fact key -> where its value came from")
    paths: PathsOut
    overrides: list[OverrideOut]
    warnings: list[str]
    assumptions: list[AssumptionOut]
    engine: dict[str, dict[str, Any]]
    policy: str = Field(description="digest of the rule files, in load order")
    origins: dict[str, str] = Field(description="rule id -> `file:line` of every rule that acted")


class FindingOut(_Open):
    code: str
    level: Literal["error", "warning"]
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    rule: str | None = None
    field: str | None = None
    help: str | None = None
    cell: str | None = None
    cells: int | None = None


class CoverageOut(_Open):
    cells: int
    groups: dict[str, int]
    resolves: int
    seconds: float
    dimensions: list[str]
    pruned: int


class CheckOutput(_Open):
    """``kernelpolicy check --json``: the findings and how much of the domain was verified."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.check/1")

    schema_: Literal["kernelpolicy.check/1"] = Field(alias="schema")
    files: list[str]
    errors: int
    warnings: int
    findings: list[FindingOut]
    coverage: CoverageOut | dict[str, Any] = Field(description="empty with --no-coverage")
    seconds: float


class GpuOut(_Open):
    name: str | None
    sm: str | None
    cc: str
    count: int
    memory_mib: int | None
    unified_memory: bool | None
    source: str


class FactsOutput(_Open):
    """``kernelpolicy facts --json``: this machine's facts, each with its source."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.machine/1")

    schema_: Literal["kernelpolicy.machine/1"] = Field(alias="schema")
    gpu: GpuOut | None
    gpu_reason: str | None
    facts: dict[str, Any]
    sources: dict[str, str]
    notes: list[str]
    providers: dict[str, dict[str, Any]]
    cache: dict[str, Any]
    raw: dict[str, dict[str, Any]]
