"""JSON Schemas of rule files and of kernelpolicy's JSON outputs, generated from the models.

``rules``
    rule and policy files (:class:`kernelpolicy.dsl.schema.RuleFileSpec`), with the fact keys,
    backend ids, severities and paths as enums, so an editor completes and checks them
    (``# yaml-language-server: $schema=...`` at the top of a file);
``decision``
    ``explain --json`` (``kernelpolicy.decision/1``);
``check``
    ``check --json`` (``kernelpolicy.check/1``);
``facts``
    ``facts --json`` (``kernelpolicy.machine/1``);
``fleet``, ``diff``, ``matrix``
    ``fleet --json``, ``diff --json``, ``matrix --format json`` (``kernelpolicy.fleet/1``, ...);
``vllm-audit``, ``vllm-matrix``, ``sglang-audit``
    ``vllm audit --json``, ``vllm audit --matrix --json``, ``sglang audit --json``;
``bench``
    ``bench --json`` (``kernelpolicy.bench/1``).

:func:`generate` builds a schema from the models and the fact vocabulary; the same schemas are
checked in under ``schemas/`` and shipped in the wheel (:func:`shipped_path`); a test fails
when the two drift. ``/1`` promises additive changes only (``docs/design.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

__all__ = ["SCHEMA_NAMES", "SchemaName", "generate", "render", "shipped_path"]

SchemaName = str
#: The schemas ``kernelpolicy schema NAME`` prints.
SCHEMA_NAMES: Final = (
    "rules",
    "decision",
    "check",
    "facts",
    "fleet",
    "diff",
    "matrix",
    "vllm-audit",
    "vllm-matrix",
    "sglang-audit",
    "bench",
)
#: The output model of each JSON output's schema (``rules`` is built apart).
_OUTPUTS: Final = {
    "decision": "DecisionOutput",
    "check": "CheckOutput",
    "facts": "FactsOutput",
    "fleet": "FleetOutput",
    "diff": "DiffOutput",
    "matrix": "MatrixOutput",
    "vllm-audit": "AuditOutput",
    "vllm-matrix": "VllmMatrixOutput",
    "sglang-audit": "SglangAuditOutput",
}
_BASE_ID: Final = "urn:kernelpolicy:schema:"
_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


def _fact_value(kind: str, domain: tuple[str, ...]) -> dict[str, Any]:
    """What a condition (or an implication's ``set``) may say about a fact of this kind."""
    scalar: dict[str, Any]
    if kind == "enum":
        scalar = {"enum": list(domain)}
    elif kind == "bool":
        scalar = {"type": "boolean"}
    elif kind == "int":
        scalar = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": r"^\s*(<=|>=|==|!=|<|>)\s*-?\d+\s*$"}]}
    elif kind == "version":
        scalar = {"type": ["string", "number"]}
    elif kind == "int_list":
        return {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "array"}]}}
    else:  # str, str_list
        scalar = {"type": ["string", "number"]}
    return {"anyOf": [scalar, {"type": "array", "items": scalar, "minItems": 1}]}


def _vocabulary() -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``Condition`` and ``FactValues`` definitions, from the fact vocabulary."""
    from ..facts.keys import ENV_PREFIX, FACT_KEYS

    props: dict[str, Any] = {}
    for name in sorted(FACT_KEYS):
        key = FACT_KEYS[name]
        doc = key.doc + (f" (e.g. `{key.example}`)" if key.example else "")
        props[name] = {"description": doc, **_fact_value(key.kind.value, key.domain)}
    env = {
        "^" + ENV_PREFIX.replace(".", r"\.") + r"[A-Za-z_][A-Za-z0-9_]*$": {
            "description": "an environment variable of the deployment, as the string it is set to",
            **_fact_value("str", ()),
        }
    }
    ref = {"$ref": "#/$defs/Condition"}
    condition = {
        "type": "object",
        "description": "fact key -> expected value (all must hold); `all`, `any`, `not` combine conditions",
        "properties": {
            **props,
            "all": {"type": "array", "items": ref, "description": "every condition holds"},
            "any": {"type": "array", "items": ref, "description": "some condition holds"},
            "not": {**ref, "description": "the condition does not hold"},
        },
        "patternProperties": env,
        "additionalProperties": False,
    }
    values = {
        "type": "object",
        "description": "fact key -> value",
        "properties": props,
        "patternProperties": env,
        "additionalProperties": False,
    }
    return condition, values


def _rules_schema() -> dict[str, Any]:
    from ..dsl.schema import RuleFileSpec
    from ..facts.keys import BACKENDS, GPU_SMS

    schema = RuleFileSpec.model_json_schema()
    defs = schema.setdefault("$defs", {})
    defs["Condition"], defs["FactValues"] = _vocabulary()
    ids = sorted({b for per_path in BACKENDS.values() for b in per_path})
    backend = {"enum": ids, "description": "a backend id (`kernelpolicy.facts.BACKENDS`)"}
    backends = {"type": "array", "items": {"$ref": "#/$defs/BackendId"}, "minItems": 1}
    defs["BackendId"] = backend
    one_or_more = {"anyOf": [{"$ref": "#/$defs/BackendId"}, backends]}
    cond = {"$ref": "#/$defs/Condition"}
    patches: dict[str, dict[str, Any]] = {
        "BackendSpec": {"backend": {"$ref": "#/$defs/BackendId"}, "requires": cond},
        "OrderSpec": {"when": cond, "backends": backends},
        "RuleSpec": {
            "when": cond,
            "deny": one_or_more,
            "prefer": backends,
            "require": cond,
            "use": {"$ref": "#/$defs/BackendId"},
            "backend": one_or_more,
            "until": cond,
        },
        "ImplySpec": {"when": cond, "unless": cond, "set": {"$ref": "#/$defs/FactValues"}},
        "ModelSpec": {"facts": {"$ref": "#/$defs/FactValues"}},
        "GpuSpec": {"sm": {"enum": list(GPU_SMS)}},
        "EnvSpec": {"deny": {"$ref": "#/$defs/BackendId"}, "use": {"$ref": "#/$defs/BackendId"}},
    }
    for model, fields in patches.items():
        props = defs[model]["properties"]
        for field, new in fields.items():
            old = props[field]
            props[field] = {**new, **{k: old[k] for k in ("description", "default") if k in old}}
    schema["title"] = "kernelpolicy rule or policy file"
    return schema


def generate(name: SchemaName) -> dict[str, Any]:
    """The JSON Schema *name* (one of :data:`SCHEMA_NAMES`), built from the models."""
    from . import _output_models as out

    if name == "rules":
        body = _rules_schema()
    elif name in _OUTPUTS:
        body = getattr(out, _OUTPUTS[name]).model_json_schema(by_alias=True)
    elif name == "bench":
        from ..bench.output import BenchOutput

        body = BenchOutput.model_json_schema(by_alias=True)
    else:
        raise ValueError(f"no schema `{name}` (one of: {', '.join(SCHEMA_NAMES)})")
    return {"$schema": _DIALECT, "$id": f"{_BASE_ID}{name}", **body}


def render(name: SchemaName) -> str:
    """:func:`generate` as the text of the checked-in file (stable key order, final newline)."""
    return json.dumps(generate(name), indent=2, ensure_ascii=False) + "\n"


def shipped_path(name: SchemaName) -> Path:
    """The schema file of *name* that ships with this install (``schemas/`` of the source tree)."""
    from .._paths import _data_dir

    return _data_dir("schemas") / f"{name}.schema.json"
