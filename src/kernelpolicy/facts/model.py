"""Model facts from a Hugging Face ``config.json``, a local folder, or the shipped catalog.

The catalog (``rules/models.yaml``) stores config.json excerpts, so a catalog model and a
local checkpoint go through the same parser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..errors import UnknownModelError, did_you_mean

__all__ = [
    "CatalogModel",
    "facts_from_config",
    "find_model",
    "parse_catalog",
    "quant_facts",
]

_EXPERT_KEYS: Final = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
_ACTIVATIONS: Final = {
    "silu": "silu",
    "swiglu": "silu",
    "gelu": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_new": "gelu",
    "relu2": "relu2",
    "relu_squared": "relu2",
    "swigluoai": "swigluoai",
}
_DTYPES: Final = {
    "bfloat16": "bfloat16",
    "float16": "float16",
    "float32": "float32",
    "bf16": "bfloat16",
}


@dataclass(frozen=True)
class CatalogModel:
    """One entry of the shipped model catalog."""

    id: str
    source: str
    config: Mapping[str, Any]
    facts: Mapping[str, Any] = field(default_factory=dict)
    refs: tuple[str, ...] = ()


def parse_catalog(entries: Sequence[Mapping[str, Any]]) -> tuple[CatalogModel, ...]:
    """Catalog entries (already schema-checked) as :class:`CatalogModel` values."""
    return tuple(
        CatalogModel(
            id=e["id"],
            source=e.get("source", ""),
            config=e["config"],
            facts=e.get("facts") or {},
            refs=tuple(e.get("refs") or ()),
        )
        for e in entries
    )


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The text model's config: ``text_config`` of multimodal checkpoints, else the whole."""
    for key in ("text_config", "language_config", "llm_config"):
        sub = config.get(key)
        if isinstance(sub, Mapping) and sub.get("model_type"):
            return {**{k: v for k, v in config.items() if k != key}, **sub}
    return config


def quant_facts(qc: Mapping[str, Any] | None) -> dict[str, object]:
    """``quant.*`` facts from a ``quantization_config`` mapping (``None``: unquantized)."""
    if not qc:
        return {"quant.scheme": "none"}
    method = str(qc.get("quant_method", "")).lower()
    out: dict[str, object] = {"quant.method": method}
    scheme: str | None = None
    block = qc.get("weight_block_size")
    if method in ("fp8", "deepseek_fp8", "ptpc_fp8"):
        if block:
            scheme = "fp8_block"
        elif method == "ptpc_fp8":
            scheme = "fp8_channel"
        else:
            scheme = "fp8_tensor"
    elif method == "fbgemm_fp8":
        scheme = "fp8_channel"
    elif method in ("compressed-tensors", "compressed_tensors"):
        scheme, block = _compressed_tensors(qc)
    elif method in ("modelopt", "modelopt_fp4", "modelopt_mxfp8"):
        algo = str(qc.get("quant_algo") or qc.get("quantization", {}).get("quant_algo", "")).upper()
        scheme = {
            "FP8": "fp8_tensor",
            "FP8_PER_CHANNEL_PER_TOKEN": "fp8_channel",
            "FP8_PB_WO": "fp8_block",
            "NVFP4": "nvfp4",
            "MXFP8": "mxfp8",
        }.get(algo)
    elif method == "mxfp4":
        scheme = "none"  # gpt-oss: linears stay BF16, experts are MXFP4
        out["quant.moe_scheme"] = "mxfp4"
    elif method in ("gptq", "awq", "gptq_marlin", "awq_marlin"):
        scheme = "w4a16" if int(qc.get("bits", 4)) == 4 else "w8a16"
    if scheme is not None:
        out["quant.scheme"] = scheme
    if block:
        out["quant.block"] = [int(b) for b in block]
    fmt = qc.get("scale_fmt")
    if fmt is not None:
        out["quant.scale_fmt"] = "ue8m0" if str(fmt).lower() == "ue8m0" else "fp32"
    elif scheme is not None and scheme.startswith("fp8"):
        out["quant.scale_fmt"] = "fp32"
    expert = str(qc.get("expert_dtype") or qc.get("experts_dtype") or "").lower()
    if expert in ("fp4", "mxfp4"):
        out["quant.moe_scheme"] = "mxfp4"
    elif expert == "nvfp4":
        out["quant.moe_scheme"] = "nvfp4"
    return out


def _compressed_tensors(qc: Mapping[str, Any]) -> tuple[str | None, list[int] | None]:
    groups = qc.get("config_groups") or {}
    for group in groups.values() if isinstance(groups, Mapping) else ():
        w = group.get("weights") or {}
        bits, typ = int(w.get("num_bits", 0)), str(w.get("type", ""))
        strategy = str(w.get("strategy", "")).lower()
        if typ == "float" and bits == 8:
            if strategy == "block":
                return "fp8_block", list(w.get("block_structure") or [128, 128])
            if strategy == "channel":
                return "fp8_channel", None
            return "fp8_tensor", None
        if typ == "float" and bits == 4:
            return ("nvfp4" if int(w.get("group_size") or 16) == 16 else "mxfp4"), None
        if typ == "int" and bits in (4, 8):
            return ("w4a16" if bits == 4 else "w8a16"), None
    return None, None


def facts_from_config(config: Mapping[str, Any]) -> dict[str, object]:
    """``model.*`` and ``quant.*`` facts from a Hugging Face config.json mapping."""
    text = _text_config(config)
    out: dict[str, object] = {}
    if text.get("model_type"):
        out["model.type"] = str(text["model_type"])
    archs = config.get("architectures") or text.get("architectures")
    if archs:
        out["model.architecture"] = str(archs[0])
    if isinstance(text.get("hidden_size"), int):
        out["model.hidden_size"] = text["hidden_size"]
    experts = next((text[k] for k in _EXPERT_KEYS if isinstance(text.get(k), int)), None)
    is_moe = bool(experts and experts > 1)
    out["model.is_moe"] = is_moe
    if is_moe:
        out["model.num_experts"] = experts
    width = text.get("moe_intermediate_size") if is_moe else None
    width = width or text.get("intermediate_size")
    if isinstance(width, int):
        out["model.intermediate_size"] = width
    act = text.get("hidden_act") or text.get("hidden_activation")
    if isinstance(act, str):
        out["model.activation"] = _ACTIVATIONS.get(act.lower(), "other")
    dtype = text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype")
    if is_moe and isinstance(dtype, str) and dtype in _DTYPES:
        # the gate weight is stored in the checkpoint dtype unless the catalog says otherwise
        out["model.router_dtype"] = _DTYPES[dtype]
    qc = config.get("quantization_config") or text.get("quantization_config")
    q = quant_facts(qc if isinstance(qc, Mapping) else None)
    expert = str(text.get("expert_dtype") or "").lower()
    if "quant.moe_scheme" not in q and expert in ("fp4", "mxfp4", "nvfp4"):
        q["quant.moe_scheme"] = "nvfp4" if expert == "nvfp4" else "mxfp4"
    if "quant.scale_fmt" not in q and text.get("scale_fmt"):
        q["quant.scale_fmt"] = "ue8m0" if str(text["scale_fmt"]).lower() == "ue8m0" else "fp32"
    out.update(q)
    if "quant.scheme" in out and "quant.moe_scheme" not in out and is_moe:
        out["quant.moe_scheme"] = out["quant.scheme"]
    return out


def find_model(spec: str, catalog: Sequence[CatalogModel]) -> tuple[Mapping[str, Any], Mapping[str, Any], str]:
    """The config of *spec* (a folder, a config.json, or a catalog id).

    Returns ``(config, extra_facts, source)`` where *source* is ``config.json`` or ``catalog``.

    :raises UnknownModelError: when *spec* is none of those.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise UnknownModelError(spec, "the folder has no `config.json`")
    if path.is_file():
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UnknownModelError(spec, f"cannot read `{path}`: {exc}") from None
        if not isinstance(config, Mapping):
            raise UnknownModelError(spec, f"`{path}` is not a JSON object")
        return config, {}, "config.json"
    by_id = {m.id.lower(): m for m in catalog}
    hit = by_id.get(spec.strip().lower())
    if hit is None:
        raise UnknownModelError(
            spec,
            "not a local folder or config.json, and not in the shipped catalog (kernelpolicy never downloads configs)",
            did_you_mean(spec, [m.id for m in catalog]),
        )
    return hit.config, hit.facts, "catalog"
