"""The shape of ``bench --json`` (``kernelpolicy.bench/1``), for its JSON Schema.

Written by :meth:`kernelpolicy.bench.report.Report.to_json`; ``tests/bench`` validates a real
report against the schema generated from this model. ``/1``: additive changes only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BenchOutput"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class BenchCandidate(_Open):
    backend: str
    valid: bool = Field(description="the decision calls it valid (chosen or viable)")
    rule: str = Field(description="valid: the catalog entry admitting it; else the first rule ruling it out")
    origin: str = Field(description="that rule's file:line")
    layer: str = Field(description="that rule's layer: shipped, policy or user")


class BenchOutcome(_Open):
    backend: str
    status: Literal["ok", "raised", "wrong", "not_run"]
    us: float | None = Field(default=None, description="median time in microseconds (ok only)")
    spread: float | None = Field(default=None, description="(max - min) / median of the passes' medians")
    error: float | None = Field(default=None, description="relative error against the float reference")
    detail: str | None = Field(default=None, description="the exception's first line, the error, or why not run")
    how: str | None = Field(default=None, description="how the engine's call was reproduced")
    passes_us: list[float] | None = Field(
        default=None, description="each pass's median in microseconds, every process's passes in turn"
    )
    mode: Literal["graph", "eager"] | None = Field(default=None, description="timed as CUDA-graph replays or eager")
    replicas: int | None = Field(default=None, description="copies of the call's data rotated over (past the L2)")
    processes: int | None = Field(default=None, description="processes whose passes are combined (absent: 1)")


class BenchCell(_Open):
    path: Literal["dense", "moe", "router", "attention"]
    layer: str
    n: int
    k: int
    experts: int
    note: str = Field(default="", description="what the shape stands for when it is not plain (replicated, ...)")
    topk: int | None = Field(default=None, description="moe: experts each token is routed to (n, k: w13's)")
    total_experts: int | None = Field(default=None, description="moe: experts over all ranks")
    kv_heads: int | None = Field(default=None, description="attention: KV heads per rank (n: q heads, k: head size)")
    phase: str | None = Field(default=None, description="attention: decode (m sequences) or prefill (m new tokens)")
    context: int | None = Field(default=None, description="attention, decode: tokens in each sequence's KV cache")
    kv_dtype: str | None = Field(default=None, description="attention: the KV cache's dtype (bf16, fp8)")
    m: int
    choice: str | None = Field(description="the decision's backend on this path")
    fastest: str | None = Field(description="the fastest correct candidate the decision calls valid")
    fastest_any: str | None = Field(description="the fastest correct candidate, ruled out or not")
    loss: float | None = Field(description="choice's time / fastest valid time - 1; null: not measured or failed")
    choice_failed: bool
    mode: str | None = Field(default=None, description="graph or eager: how the cell's candidates were timed")
    beyond_noise: bool | None = Field(
        default=None, description="the choice's loss exceeds the noise (pass times over repeats and processes)"
    )
    outcomes: list[BenchOutcome]


class BenchFailure(_Open):
    path: str
    layer: str
    m: int
    backend: str
    status: Literal["raised", "wrong"]
    detail: str
    valid: bool
    rule: str
    origin: str
    contradicts_shipped: bool = Field(description="a shipped rule calls the candidate valid here")


class BenchOutput(_Open):
    """``kernelpolicy bench --json``."""

    schema_: Literal["kernelpolicy.bench/1"] = Field(alias="schema")
    model: str
    machine: str
    date: str
    versions: dict[str, str]
    runners: dict[str, str]
    deployment: dict[str, int]
    protocol: dict[str, int | str]
    decision: dict[str, str | None]
    fingerprint: str
    facts: dict[str, object]
    candidates: dict[str, list[BenchCandidate]]
    cells: list[BenchCell]
    failures: list[BenchFailure]
