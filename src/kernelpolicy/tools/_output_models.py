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

__all__ = [
    "AuditOutput",
    "CheckOutput",
    "DecisionOutput",
    "DiffOutput",
    "FactsOutput",
    "FleetOutput",
    "MatrixOutput",
    "SglangAuditOutput",
    "VllmMatrixOutput",
]


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
    preferred_by: list[str] = Field(
        default=[],
        description="the `prefer` rules that reordered the path's candidates, in the order they applied"
        " (absent: none did)",
    )
    candidates: list[CandidateOut]


class PathsOut(_Open):
    dense: PathOut
    moe: PathOut
    router: PathOut
    attention: PathOut | None = Field(
        None, description="the attention backend (issue #39; added within /1: absent from older decisions)"
    )
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


# -- fleet --json ---------------------------------------------------------------------------------


class FleetNodeOut(_Open):
    id: str = Field(description="the node id (Ray's, or the `--from` file's)")
    address: str | None
    status: Literal["ok", "missing", "error", "failed", "timeout", "dead"]
    reason: str | None = Field(description="why a node gave no decision; null when `ok`")
    head: bool = Field(description="the cluster's head node (or the `head-shell` row)")
    facts: dict[str, Any] = {}
    sources: dict[str, str] = {}
    decision: dict[str, Any] = Field(
        default={},
        description="fingerprint, ok, paths, refused (the explicit choices it refused) and warnings of its decision",
    )


class FleetGroupOut(_Open):
    label: str = Field(description="A, B, ... in the order of the report")
    gpu_class: str = Field(default="", description="the GPU class its decision is compared within (`gpu.sm`)")
    fingerprint: str
    nodes: list[str]
    paths: dict[str, Any]


class FleetClassOut(_Open):
    gpu_class: str = Field(description="the compute capability (`gpu.sm`), or `none`")
    groups: list[str] = Field(description="the labels of its groups")
    agrees: bool = Field(description="one group: every node of the class decides alike")
    differing_facts: list[str] = []


class FleetOutput(_Open):
    """``kernelpolicy fleet --json``: every node's facts and decision, grouped by fingerprint."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.fleet/1")

    schema_: Literal["kernelpolicy.fleet/1"] = Field(alias="schema")
    cluster: dict[str, Any]
    nodes: list[FleetNodeOut]
    groups: list[FleetGroupOut]
    gpu_classes: list[FleetClassOut] = Field(
        default=[], description="the groups of each GPU class: a class whose groups differ makes the exit status 1"
    )
    differing_facts: list[str] = Field(
        description="the facts that differ between groups of one GPU class, worded as the report"
    )
    exit: Literal[0, 1, 2, 3, 4, 5] = Field(description="the exit status (docs/design.md)")


# -- diff --json ----------------------------------------------------------------------------------


class DiffGroupOut(_Open):
    cells: str = Field(description="the cells of the group, as a condition")
    count: int


class DiffChangeOut(_Open):
    path: str
    old: str | None = Field(description="the backend before (null: none)")
    new: str | None = Field(description="the backend after (null: none)")
    cells: int = Field(description="the cells whose decision on the path changes so (exact, listed or not)")
    group_count: int = Field(description="the groups those cells make (the largest are listed)")
    groups: list[DiffGroupOut] = Field(description="the largest groups, at most 10,000 of each model kind")


class DiffOutput(_Open):
    """``kernelpolicy diff OLD NEW --json``: every domain cell whose decision the change moves."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.diff/1")

    schema_: Literal["kernelpolicy.diff/1"] = Field(alias="schema")
    old: str
    new: str
    cells: int = Field(description="the domain cells compared")
    seconds: float
    changes: list[DiffChangeOut]


# -- matrix --format json -------------------------------------------------------------------------


class MatrixCellOut(_Open):
    gpu: str = Field(description="the catalog product name")
    sm: str
    model: str
    quant: str
    path: Literal["dense", "moe", "router", "attention"]
    backend: str | None = Field(description="null: no valid backend (or the model has no such path)")
    present: bool = Field(description="false: the model has no such path")
    rule: str | None = Field(
        description="the first rule that rejected a candidate ranked above the chosen one, else the `prefer` rule"
        " that put the chosen one first"
    )
    reason: str
    refs: list[str]
    origin: str = Field(description="`file:line` of `rule`")
    rules: list[str] = Field(default=[], description="every rule that decided the cell")
    preferred_by: list[str] = Field(
        default=[],
        description="the `prefer` rules that reordered the path's candidates (`rule` is one when it decided)",
    )


class MatrixOutput(_Open):
    """``kernelpolicy matrix --format json``: every catalog GPU x model x path."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.matrix/1")

    schema_: Literal["kernelpolicy.matrix/1"] = Field(alias="schema")
    cells: list[MatrixCellOut]


# -- vllm audit --json, vllm audit --matrix --json, sglang audit --json -----------------------------


class AuditPathOut(_Open):
    vllm: str | None
    vllm_label: str | None
    kernelpolicy: str | None
    kernelpolicy_label: str | None
    same: bool
    kind: str | None = Field(description="`conflict` or `preference` when not the same")
    reason: str | None


class AuditOutput(_Open):
    """``kernelpolicy vllm audit --json``: vLLM's own choices beside the decision."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.vllm-audit/1")

    schema_: Literal["kernelpolicy.vllm-audit/1"] = Field(alias="schema")
    exit: Literal[0, 1]
    consistent: bool
    vllm: dict[str, Any]
    gpu: dict[str, Any]
    model: dict[str, Any]
    plugin: dict[str, Any]
    env: dict[str, str]
    moe_backend: str | None
    paths: dict[str, AuditPathOut]
    divergences: list[str]
    differences: list[dict[str, Any]]
    probe_errors: dict[str, Any]
    fingerprint: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    engine: dict[str, dict[str, Any]]


class VllmMatrixCellOut(_Open):
    model: str
    family: str
    option: str
    vllm: dict[str, Any]
    kernelpolicy: dict[str, str | None]
    with_plugin: dict[str, Any]
    result: str = Field(description="same, differs, conflict, refused, could not run")
    reason: str | None
    parity: bool | None
    fingerprint: str


class VllmMatrixOutput(_Open):
    """``kernelpolicy vllm audit --matrix --json``: the conformance sweep of one vLLM release."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.vllm-matrix/1")

    schema_: Literal["kernelpolicy.vllm-matrix/1"] = Field(alias="schema")
    vllm: str
    cells: list[VllmMatrixCellOut]


class SglangAuditCellOut(_Open):
    model: str
    family: str
    kernelpolicy: dict[str, str | None]
    sglang: dict[str, Any]
    with_plugin: dict[str, Any]
    with_flags: dict[str, Any]
    flags: dict[str, Any]
    result: str = Field(description="same, differs, conflict, unsupported, could not run")
    reason: str | None
    parity: bool | None
    fingerprint: str


class SglangAuditOutput(_Open):
    """``kernelpolicy sglang audit --json``: SGLang's own choices beside the decision, per cell."""

    model_config = ConfigDict(extra="allow", title="kernelpolicy.sglang-audit/1")

    schema_: Literal["kernelpolicy.sglang-audit/1"] = Field(alias="schema")
    sglang: str
    cells: list[SglangAuditCellOut]
