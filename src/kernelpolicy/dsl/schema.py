"""The shape of a rule file, as pydantic models (structure only; meaning is checked later).

A rule file is a YAML mapping with any of these sections:

``backends``
    what exists on each path and what it needs (the catalog);
``order``
    the default priority of the backends of a path, optionally per GPU family or scheme;
``rules``
    what is known: ``deny`` a backend, ``prefer`` an order, ``require`` facts for a backend,
    or (operator policy only) ``use`` a backend;
``implies``
    facts that follow from other facts (a vLLM release implies the DeepGEMM it vendors);
``unsupported``
    deployments where a path knowingly has no valid backend (no kernel exists for them), so
    ``kernelpolicy check`` accepts those cells and ``explain`` says why;
``models``, ``gpus``
    the shipped catalogs;
``engine``
    an engine's vocabulary (backend names, flags, environment variables).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "SEVERITIES",
    "BackendSpec",
    "EngineSpec",
    "EnvSpec",
    "FixSpec",
    "GpuSpec",
    "ImplySpec",
    "ModelSpec",
    "OrderSpec",
    "RuleFileSpec",
    "RuleSpec",
    "UnsupportedSpec",
]

PathName = Literal["dense", "moe", "router", "attention", "warmup"]
Severity = Literal["crash", "accuracy", "perf", "support"]
SEVERITIES = ("crash", "accuracy", "perf", "support")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BackendSpec(_Strict):
    backend: str
    paths: list[PathName] = Field(min_length=1)
    requires: dict[str, Any] | None = None
    warmup: bool = False
    auto: bool = True  #: false: chosen only when a deployment asks for it explicitly
    because: str | None = None
    refs: list[str] = []


class OrderSpec(_Strict):
    id: str
    path: PathName
    when: dict[str, Any] | None = None
    backends: list[str] = Field(min_length=1)
    because: str | None = None
    refs: list[str] = []


class FixSpec(_Strict):
    """How a rule's cited fix shows in a released package: a file inside it and one signature
    (``contains`` a substring, ``matches`` a regular expression, or ``symbol``: a name a Python
    file defines). ``kernelpolicy knowledge stale`` checks the rule's window against every
    scanned release of the package (``releases/packages/contents.json``)."""

    package: str = Field(min_length=1)  #: as the package index names it (``flashinfer-python``)
    file: str = Field(min_length=1)  #: a path inside the wheel (``flashinfer/data/csrc/...``)
    contains: str | None = Field(default=None, min_length=1)
    matches: str | None = Field(default=None, min_length=1)
    symbol: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_signature(self) -> FixSpec:
        given = [k for k in ("contains", "matches", "symbol") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a fix names exactly one signature: `contains`, `matches` or `symbol`")
        if self.matches is not None:
            try:
                re.compile(self.matches)
            except re.error as e:
                raise ValueError(f"`matches` is not a regular expression: {e}") from None
        return self


class RuleSpec(_Strict):
    id: str = Field(min_length=1)
    when: dict[str, Any] | None = None
    deny: str | list[str] | None = None
    prefer: list[str] | None = None
    require: dict[str, Any] | None = None
    use: str | None = None
    backend: str | list[str] | None = None
    paths: list[PathName] | None = None
    overrides: list[str] = []
    severity: Severity | None = None
    because: str = Field(min_length=1)
    help: str | None = None
    refs: list[str] = []
    until: dict[str, Any] | None = None
    #: how the cited fix shows in released code: one signature, or a list of alternatives (the fix
    #: shows in a release where any of them does: a file moved, a symbol renamed between releases)
    fix: list[FixSpec] | None = None

    @field_validator("fix", mode="before", json_schema_input_type=FixSpec | list[FixSpec] | None)
    @classmethod
    def _alternatives(cls, fix: Any) -> Any:
        """One signature is a list of one (so each alternative's error names its place)."""
        return [fix] if isinstance(fix, dict) else fix

    @field_validator("fix")
    @classmethod
    def _one_fixed_package(cls, fix: list[FixSpec] | None) -> list[FixSpec] | None:
        # a field validator, so a bad `fix` is dropped from the rule it is reported on
        if fix is not None:
            if not fix:
                raise ValueError("`fix: []` names no signature: give one, or a list of alternatives")
            packages = sorted({f.package for f in fix})
            if len(packages) > 1:
                raise ValueError(f"a fix's alternatives show one fix in one package; these name {', '.join(packages)}")
        return fix


class ImplySpec(_Strict):
    id: str
    when: dict[str, Any]
    unless: dict[str, Any] | None = None
    set: dict[str, Any] = Field(min_length=1)
    because: str | None = None
    refs: list[str] = []


class UnsupportedSpec(_Strict):
    id: str = Field(min_length=1)
    when: dict[str, Any]
    paths: list[Literal["dense", "moe", "router", "attention"]] = Field(min_length=1)
    refuse: bool = False
    because: str = Field(min_length=1)
    help: str | None = None
    refs: list[str] = []


class ModelSpec(_Strict):
    id: str
    source: str
    config: dict[str, Any]
    facts: dict[str, Any] | None = None
    refs: list[str] = []


class GpuSpec(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str
    aliases: list[str] = []
    sm: str
    host_machine: Literal["x86_64", "aarch64"] | None = Field(default=None, alias="host.machine")
    unified_memory: bool | None = None
    source: str = ""


class EnvSpec(_Strict):
    name: str
    value: str
    deny: str | None = None
    use: str | None = None
    paths: list[PathName] | None = None
    because: str = Field(min_length=1)


class EngineSpec(_Strict):
    name: str
    #: how to enable the plugin; its ``pip install 'kernelpolicy[X]'`` is printed as it works from this install
    plugin: str | None = None
    aliases: dict[PathName, dict[str, str]] = {}  #: engine name -> kernelpolicy id, per path
    moe_flag: dict[str, str] = {}  #: kernelpolicy id -> ``--moe-backend`` value
    #: ``quant.moe_scheme`` value -> kernelpolicy id -> the engine's MoE flag value for that
    #: scheme, where it is not ``moe_flag``'s (SGLang runs MXFP4 experts under other names)
    moe_flag_by_scheme: dict[str, dict[str, str]] = {}
    #: kernelpolicy dense id -> the environment that selects it where no flag value does
    dense_env: dict[str, dict[str, str]] = {}
    dense_kernels: dict[str, list[str]] = {}  #: kernelpolicy id -> engine kernel class names
    env: list[EnvSpec] = []


class RuleFileSpec(_Strict):
    backends: list[BackendSpec] = []
    order: list[OrderSpec] = []
    rules: list[RuleSpec] = []
    implies: list[ImplySpec] = []
    unsupported: list[UnsupportedSpec] = []
    models: list[ModelSpec] = []
    gpus: list[GpuSpec] = []
    engine: EngineSpec | None = None
