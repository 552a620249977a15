"""Typed Hugging Face configs: the fields of ``config.json`` and its quantization config that
decide a kernel, as strict records (:mod:`._records`), and the ``model.*`` / ``quant.*`` facts
they give.

Only the fields kernelpolicy reads are declared (every other key is ignored), and each is
strictly typed: ``num_local_experts: 8.0`` or ``"many"`` is an error naming the file and the
field, never a dense model by accident. Quantization configs are told apart by
``quant_method`` as vLLM tells them apart (``fp8``, ``compressed-tensors``, ``modelopt``,
``mxfp4``, ``mxfp8``, ``gptq``/``awq`` and their Marlin forms); any other method is a fact
(``quant.method_known: false``), not an error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeVar

from ..errors import FactError, KernelPolicyError
from ._records import MISSING, Invalid, read, record, spec
from .record import normalise_value

__all__ = [
    "KNOWN_METHODS",
    "MAX_MODEL_TYPE",
    "CompressedTensorsConfig",
    "Fp8Config",
    "HfConfig",
    "ModelConfigError",
    "ModelOptConfig",
    "Mxfp4Config",
    "WeightOnlyIntConfig",
    "config_facts",
    "quant_config_facts",
]

#: How deep a config may nest before it is refused (real configs nest three or four levels).
MAX_DEPTH: Final = 32


class ModelConfigError(KernelPolicyError, ValueError):
    """A config.json (or quantization config) whose field has the wrong type or value."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        self.message = message
        super().__init__(file, field, message)

    def __str__(self) -> str:
        where = f"field `{self.field}`: " if self.field else ""
        return f"`{self.file}`: {where}{self.message}"


_R = TypeVar("_R")
_Blocks = list[int]


# ----------------------------------------------------------------------------- config.json


@record
class HfConfig:
    """The fields of a (text) model config that decide a kernel."""

    model_type: str | None = None
    architectures: list[str] | None = None
    hidden_size: int | None = None
    intermediate_size: int | None = None
    moe_intermediate_size: int | None = None
    #: routed experts, under every name a model family uses (ERNIE-VL lists one per modality)
    num_experts: int | list[int] | None = None
    num_local_experts: int | list[int] | None = None
    n_routed_experts: int | list[int] | None = None
    moe_num_experts: int | list[int] | None = None
    num_experts_per_tok: int | None = None
    hidden_act: str | None = None
    hidden_activation: str | None = None
    torch_dtype: str | None = None
    dtype: str | None = None
    scoring_func: str | None = None
    topk_method: str | None = None
    n_group: int | None = None
    norm_topk_prob: bool | None = None
    expert_dtype: str | None = None
    experts_dtype: str | None = None
    scale_fmt: str | None = None
    quantization_config: dict[str, Any] | None = None
    compression_config: dict[str, Any] | None = None
    # attention (issue #39)
    head_dim: int | None = None
    global_head_dim: int | None = None  #: Gemma 4's full-attention layers (wider than its window layers)
    num_attention_heads: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    index_topk: int | None = None
    sliding_window: int | None = None
    use_sliding_window: bool | None = None
    layer_types: list[str] | None = None


# ----------------------------------------------------------------------------- quantization


@record
class Fp8Config:
    """vLLM's ``fp8`` (and ``ptpc_fp8``, ``fbgemm_fp8``): per-tensor, per-channel or block scales."""

    quant_method: Literal["fp8", "ptpc_fp8", "fbgemm_fp8"]
    activation_scheme: Literal["static", "dynamic"] | None = None
    weight_block_size: _Blocks | None = spec(length=2)
    ignored_layers: list[str] | None = None
    modules_to_not_convert: list[str] | None = None
    scale_fmt: str | None = None


@record
class CtArgs:
    """compressed-tensors ``weights`` / ``input_activations`` of one config group."""

    num_bits: int
    type: Literal["float", "int"]
    #: tensor, channel, group, block, token, tensor_group, attn_head, ...: open, so a strategy a
    #: newer compressed-tensors adds is an unrecognised scheme (a fact), not a broken config
    strategy: str | None = None
    group_size: int | None = None
    block_structure: _Blocks | None = spec(length=2)
    dynamic: bool | Literal["local"] | None = None
    symmetric: bool | None = None


@record
class CtGroup:
    targets: list[str] = spec(default_factory=list)
    weights: CtArgs | None = None
    input_activations: CtArgs | None = None


@record
class CompressedTensorsConfig:
    """``compressed-tensors`` (llm-compressor): config groups, each with its targets."""

    quant_method: Literal["compressed-tensors", "compressed_tensors"]
    config_groups: dict[str, CtGroup] = spec(default_factory=dict)
    ignore: list[str] = spec(default_factory=list)
    format: str | None = None


@record
class ModelOptLayer:
    quant_algo: str
    group_size: int | None = None


@record
class ModelOptConfig:
    """NVIDIA ModelOpt (``hf_quant_config.json`` or ``quant_method: modelopt``)."""

    quant_method: Literal["modelopt", "modelopt_fp4", "modelopt_mxfp8"]
    quant_algo: str | None = None
    group_size: int | None = None
    kv_cache_quant_algo: str | None = None
    exclude_modules: list[str] | None = None
    #: per-layer algorithms of a ``MIXED_PRECISION`` checkpoint
    quantized_layers: dict[str, ModelOptLayer] | None = None


@record
class Mxfp4Config:
    """``mxfp4`` (gpt-oss) and ``mxfp8``: OCP microscaling, block 32, E8M0 scales."""

    quant_method: Literal["mxfp4", "mxfp8"]
    modules_to_not_convert: list[str] | None = None


@record
class WeightOnlyIntConfig:
    """GPTQ / AWQ integer weights (W4A16, W8A16), run by Marlin or their own kernels."""

    quant_method: Literal["gptq", "awq", "gptq_marlin", "awq_marlin"]
    bits: int = spec(default=4, alias="w_bit")
    group_size: int | None = spec(alias="q_group_size")
    desc_act: bool | None = None
    sym: bool | None = None
    checkpoint_format: str | None = None


_MODELS: Final[dict[str, type]] = {
    "fp8": Fp8Config,
    "ptpc_fp8": Fp8Config,
    "fbgemm_fp8": Fp8Config,
    "compressed-tensors": CompressedTensorsConfig,
    "compressed_tensors": CompressedTensorsConfig,
    "modelopt": ModelOptConfig,
    "modelopt_fp4": ModelOptConfig,
    "modelopt_mxfp8": ModelOptConfig,
    "mxfp4": Mxfp4Config,
    "mxfp8": Mxfp4Config,
    "gptq": WeightOnlyIntConfig,
    "awq": WeightOnlyIntConfig,
    "gptq_marlin": WeightOnlyIntConfig,
    "awq_marlin": WeightOnlyIntConfig,
}
#: The ``quant_method`` values whose FP8/FP4 kernels kernelpolicy decides.
KNOWN_METHODS: Final = tuple(_MODELS)

#: ModelOpt's ``quant_algo`` names as schemes (vLLM's ``modelopt.py``).
_MODELOPT_ALGOS: Final = {
    "FP8": "fp8_tensor",
    "FP8_PER_CHANNEL_PER_TOKEN": "fp8_channel",
    "FP8_PB_WO": "fp8_block",
    "NVFP4": "nvfp4",
    "MXFP8": "mxfp8",
    "W4A8_AWQ": "w4a8",
    "W4A16_AWQ": "w4a16",
}
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
_DTYPES: Final = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32", "bf16": "bfloat16"}
_TEXT_KEYS: Final = ("text_config", "language_config", "llm_config")
#: ``(weight bits, activation bits)`` of the linear layers per scheme; ``w4a8`` has no
#: ``quant.scheme`` value of its own and is told by these two facts.
_BITS: Final = {
    "fp8_block": (8, 8),
    "fp8_tensor": (8, 8),
    "fp8_channel": (8, 8),
    "mxfp8": (8, 8),
    "nvfp4": (4, 4),
    "mxfp4": (4, 4),
    "w4a16": (4, 16),
    "w8a16": (8, 16),
    "w4a8": (4, 8),
}
#: ModelOpt algorithm -> how it scales activations (``quant.moe_activation_scale``): a serialized
#: NVFP4 or FP8 checkpoint stores one calibrated ``input_scale`` per tensor; FP8_PER_CHANNEL_PER_TOKEN
#: scales per token, block FP8 and MXFP8 per group of the row, at run time
_MODELOPT_ACT_SCALE: Final = {
    "NVFP4": "per_tensor",
    "FP8": "per_tensor",
    "FP8_PER_CHANNEL_PER_TOKEN": "per_token",
    "FP8_PB_WO": "per_group",
    "MXFP8": "per_group",
}
#: compressed-tensors ``input_activations.strategy`` -> ``quant.moe_activation_scale``
_CT_ACT_SCALE: Final = {
    "tensor": "per_tensor",
    "tensor_group": "per_tensor",  # NVFP4: 16-element blocks under one global scale per tensor
    "token": "per_token",
    "group": "per_group",
    "block": "per_group",
}
_MODELOPT_DOMAIN: Final = ("FP8", "FP8_PB_WO", "FP8_PER_CHANNEL_PER_TOKEN", "NVFP4", "MXFP8", "MIXED_PRECISION")


# ----------------------------------------------------------------------------- validation


def _plain(value: Any) -> Any:
    """*value* with tuples as lists (a config built in Python, e.g. vLLM's ``hf_config.to_dict()``)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _depth_ok(value: object, limit: int = MAX_DEPTH) -> bool:
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list | tuple):
            stack.extend((v, depth + 1) for v in node)
    return True


def _field(loc: tuple[int | str, ...], prefix: str) -> str:
    path = ".".join(str(p) for p in loc)
    return f"{prefix}{path}" if path else prefix.rstrip(".")


def _validate(model: type[_R], data: Mapping[str, Any], file: str, prefix: str) -> _R:
    try:
        return read(model, data)
    except Invalid as exc:
        field = _field(exc.loc, prefix)
        if exc.got is MISSING:
            raise ModelConfigError(file, field, exc.reason) from None
        got = exc.got
        shown = repr(got) if isinstance(got, str) else str(got)
        if len(shown) > 40:
            shown = shown[:37] + "..."
        raise ModelConfigError(file, field, f"{exc.reason} (got `{shown}`)") from None


def _text_config(config: Mapping[str, Any], file: str) -> tuple[Mapping[str, Any], str]:
    """The text model's config (``text_config`` of multimodal wrappers), and its field prefix."""
    for key in _TEXT_KEYS:
        sub = config.get(key)
        if sub is None:
            continue
        if not isinstance(sub, Mapping):
            raise ModelConfigError(file, key, f"expected a mapping (got `{type(sub).__name__}`)")
        if sub.get("model_type") or any(k in sub for k in ("hidden_size", "num_experts", "num_local_experts")):
            return {**{k: v for k, v in config.items() if k != key}, **sub}, f"{key}."
    return config, ""


# ----------------------------------------------------------------------------- facts


def _experts(value: int | list[int] | None) -> int | None:
    if isinstance(value, list):
        return max(value) if value else None
    return value


def _routing(text: HfConfig) -> str | None:
    """The routing method (``model.moe_routing``) where config.json fixes it; else ``None``
    (``rules/known/moe_routing.yaml`` implies it from ``model.type``)."""
    model_type = text.model_type or ""
    if model_type.startswith("llama4"):
        return "llama4"
    if text.scoring_func != "softmax" and (text.n_group is not None or text.topk_method == "noaux_tc"):
        return "deepseek_v3"  # grouped sigmoid top-k with a correction bias (GLM-4.5 leaves scoring_func out)
    if text.scoring_func == "sigmoid":
        return "minimax" if model_type.startswith("minimax") else None
    if text.norm_topk_prob is True:
        return "renormalize_naive"
    if text.norm_topk_prob is False:
        return "default"
    return None


def config_facts(  # noqa: PLR0912, PLR0915 (predates the lint; split in a follow-up)
    config: Mapping[str, Any],
    *,
    file: str = "config.json",
    quant_file: Mapping[str, Any] | None = None,
    quant_file_name: str = "hf_quant_config.json",
) -> dict[str, object]:
    """``model.*`` and ``quant.*`` facts from a config.json mapping (and hf_quant_config.json).

    :raises ModelConfigError: a field kernelpolicy reads has the wrong type or value.
    """
    if not _depth_ok(config):
        raise ModelConfigError(file, "", f"nested deeper than {MAX_DEPTH} levels")
    config = _plain(config)
    if quant_file is not None:
        if not _depth_ok(quant_file):
            raise ModelConfigError(quant_file_name, "", f"nested deeper than {MAX_DEPTH} levels")
        quant_file = _plain(quant_file)
    raw_text, prefix = _text_config(config, file)
    text: HfConfig = _validate(HfConfig, raw_text, file, prefix)
    outer: HfConfig = _validate(HfConfig, config, file, "") if prefix else text
    out: dict[str, object] = {}
    if text.model_type and len(text.model_type) > MAX_MODEL_TYPE:
        raise ModelConfigError(
            file, prefix + "model_type", f"expected a model type name, got {len(text.model_type):,} characters"
        )
    if text.model_type:
        out["model.type"] = text.model_type
    archs = outer.architectures or text.architectures
    if archs and len(archs[0]) > MAX_MODEL_TYPE:
        raise ModelConfigError(file, "architectures", f"expected a class name, got {len(archs[0]):,} characters")
    if archs:
        out["model.architecture"] = archs[0]
    if text.hidden_size is not None:
        out["model.hidden_size"] = text.hidden_size
    counts = (text.num_experts, text.n_routed_experts, text.num_local_experts, text.moe_num_experts)
    _check_sizes(text, counts, file, prefix)
    experts = next((n for n in map(_experts, counts) if n is not None), None)
    is_moe = bool(experts and experts > 1)
    out["model.is_moe"] = is_moe
    if is_moe:
        out["model.num_experts"] = experts
        if text.num_experts_per_tok is not None and experts is not None and text.num_experts_per_tok > experts:
            raise ModelConfigError(
                file,
                prefix + "num_experts_per_tok",
                f"`{text.num_experts_per_tok}` experts per token, more than the model's {experts} experts",
            )
        if text.num_experts_per_tok is not None:
            out["model.experts_per_token"] = text.num_experts_per_tok
        routing = _routing(text)
        if routing is not None:
            out["model.moe_routing"] = routing
    width = (text.moe_intermediate_size if is_moe else None) or text.intermediate_size
    if width is not None:
        out["model.intermediate_size"] = width
    act = text.hidden_act or text.hidden_activation
    if act is not None:
        out["model.activation"] = _ACTIVATIONS.get(act.lower(), "other")
    dtype = text.torch_dtype or text.dtype or outer.torch_dtype or outer.dtype
    if dtype in _DTYPES:
        out["model.activation_dtype"] = _DTYPES[dtype]
        if is_moe:  # the gate weight is stored in the checkpoint dtype unless the catalog says otherwise
            out["model.router_dtype"] = _DTYPES[dtype]
    out.update(_attention(text, file, prefix))
    qc = outer.quantization_config or text.quantization_config or outer.compression_config
    q_file, q_prefix = file, "quantization_config."
    if qc is None and quant_file is not None:
        qc, q_file, q_prefix = _modelopt_file(quant_file, quant_file_name)
    q = quant_config_facts(qc, file=q_file, prefix=q_prefix)
    expert = (text.expert_dtype or text.experts_dtype or "").lower()
    if "quant.moe_scheme" not in q and expert in ("fp4", "mxfp4", "nvfp4"):
        q["quant.moe_scheme"] = "nvfp4" if expert == "nvfp4" else "mxfp4"
    if "quant.scale_fmt" not in q and text.scale_fmt:
        q["quant.scale_fmt"] = "ue8m0" if text.scale_fmt.lower() == "ue8m0" else "fp32"
    out.update(q)
    if "quant.scheme" in out and "quant.moe_scheme" not in out and is_moe:
        out["quant.moe_scheme"] = out["quant.scheme"]
    if not is_moe:
        out.pop("quant.moe_activation_scale", None)
    elif out.get("quant.moe_scheme") in ("mxfp4", "w4a16") and out.get("quant.scheme") in ("none", None):
        out.pop("quant.moe_activation_scale", None)  # BF16 activations (gpt-oss MXFP4, W4A16 experts)
    if is_moe and "quant.scheme" in out and "quant.moe_scheme" in out:
        # a mixed checkpoint: experts quantized otherwise than the linears (MXFP8 dense, NVFP4 experts)
        out["quant.mixed"] = out["quant.scheme"] != out["quant.moe_scheme"]
    for key, value in out.items():  # every value one its fact takes (sizes in range, ...)
        try:
            normalise_value(key, value)
        except FactError as exc:
            raise ModelConfigError(file, "", f"gives fact `{key}`: {exc.message}") from None
    return out


#: The longest ``model_type`` read (Hugging Face's are short identifiers; a 2 MB one was printed).
MAX_MODEL_TYPE: Final = 200
_SIZES: Final = ("hidden_size", "intermediate_size", "moe_intermediate_size", "num_experts_per_tok")
_COUNTS: Final = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")


def _check_sizes(text: Any, counts: tuple[Any, ...], file: str, prefix: str) -> None:
    """Sizes are positive and expert counts not negative (a negative or empty count is not a
    dense model), each below 2**63: refused naming the field, never read as something else."""
    for name in _SIZES:
        n = getattr(text, name, None)
        if isinstance(n, int) and not 0 < n < 2**63:
            raise ModelConfigError(file, prefix + name, "expected a positive integer below 2**63")
    for name, c in zip(_COUNTS, counts, strict=True):
        items = c if isinstance(c, list) else [c] if c is not None else []
        if isinstance(c, list) and not c:
            raise ModelConfigError(file, prefix + name, "expected a count of experts, got an empty list")
        if isinstance(c, list) and any(isinstance(v, int) and v == 0 for v in c):
            # a list counts each modality's experts (ERNIE-VL): a 0 there is no model's (it was read as dense)
            shown = f" (got `{c}`)" if len(c) <= 8 else ""
            raise ModelConfigError(file, prefix + name, f"expected a positive count of experts per entry{shown}")
        if any(isinstance(v, int) and not 0 <= v < 2**63 for v in items):
            raise ModelConfigError(file, prefix + name, "expected a count of experts (0 or more, below 2**63)")


def _attention(text: HfConfig, file: str, prefix: str) -> dict[str, object]:
    """The attention facts of a (text) config (issue #39): MLA and its dims, the head size the
    attention kernel sees (``kv_lora_rank + qk_rope_head_dim`` under MLA, as vLLM computes it),
    a sliding window, a sparse-attention indexer."""
    for name in ("head_dim", "global_head_dim", "num_attention_heads", "kv_lora_rank", "index_topk"):
        n = getattr(text, name)
        if n is not None and not 0 < n < 2**31:
            raise ModelConfigError(file, prefix + name, "expected a positive integer below 2**31")
    rope = text.qk_rope_head_dim  # 0: rope-free MLA (GLM-5.3-Flash)
    if rope is not None and not 0 <= rope < 2**31:
        raise ModelConfigError(file, prefix + "qk_rope_head_dim", "expected an integer from 0 to below 2**31")
    out: dict[str, object] = {}
    mla = text.kv_lora_rank is not None
    if mla or text.num_attention_heads is not None:  # a config that describes its attention says MLA or not
        out["model.mla"] = mla
    if mla:
        out["model.kv_lora_rank"] = text.kv_lora_rank
        out["model.sparse_attention"] = text.index_topk is not None
        if text.qk_rope_head_dim is not None:
            out["model.qk_rope_head_dim"] = text.qk_rope_head_dim
            out["model.head_size"] = text.kv_lora_rank + text.qk_rope_head_dim  # type: ignore[operator]
    elif text.head_dim is not None:  # the widest head any layer has: a kernel must take them all
        out["model.head_size"] = max(text.head_dim, text.global_head_dim or 0)
    elif text.hidden_size is not None and text.num_attention_heads and text.hidden_size % text.num_attention_heads == 0:
        out["model.head_size"] = text.hidden_size // text.num_attention_heads
    if text.layer_types is not None:
        out["model.sliding_window"] = "sliding_attention" in text.layer_types
    elif text.use_sliding_window is False:  # Qwen2/Qwen3 write a window they do not use
        out["model.sliding_window"] = False
    elif text.sliding_window is not None:
        out["model.sliding_window"] = text.sliding_window > 0
    return out


def _modelopt_file(data: Mapping[str, Any], name: str) -> tuple[dict[str, Any], str, str]:
    """``hf_quant_config.json`` (``{"producer": ..., "quantization": {...}}``) as a quant config."""
    body = data.get("quantization")
    if not isinstance(body, Mapping):
        raise ModelConfigError(name, "quantization", "expected a mapping")
    return {"quant_method": "modelopt", **body}, name, "quantization."


def quant_config_facts(  # noqa: PLR0912 (predates the lint; split in a follow-up)
    qc: Mapping[str, Any] | None, *, file: str = "config.json", prefix: str = "quantization_config."
) -> dict[str, object]:
    """``quant.*`` facts from a quantization config mapping (``None``: unquantized).

    :raises ModelConfigError: a field kernelpolicy reads has the wrong type or value.
    """
    if qc is None:
        return {"quant.scheme": "none", "quant.modelopt_algo": "none", "quant.input_transform": "none"}
    if not isinstance(qc, Mapping):
        raise ModelConfigError(file, prefix.rstrip("."), "expected a mapping")
    raw = qc.get("quant_method")
    if not isinstance(raw, str):
        raise ModelConfigError(file, f"{prefix}quant_method", "expected a string naming the method")
    method = raw.lower().replace("compressed_tensors", "compressed-tensors")
    out: dict[str, object] = {"quant.method": method}
    model = _MODELS.get(method)
    if model is None:
        out["quant.method_known"] = False
        return out
    out["quant.method_known"] = True
    body = dict(qc)
    nested = qc.get("quantization")
    if model is ModelOptConfig and isinstance(nested, Mapping):
        # hf_quant_config.json's body under `quantization`, as vLLM merges it into its quant config
        body, prefix = {**nested, **{k: v for k, v in qc.items() if k != "quantization"}}, f"{prefix}quantization."
    parsed: object = _validate(model, {**body, "quant_method": method}, file, prefix)
    if isinstance(parsed, Fp8Config):
        out.update(_fp8(parsed, file, prefix))
    elif isinstance(parsed, CompressedTensorsConfig):
        out.update(_compressed_tensors(parsed, file, prefix))
        transform = _input_transform(qc.get("transform_config"), file, f"{prefix}transform_config")
        if transform is not None:
            out["quant.input_transform"] = transform
    elif isinstance(parsed, ModelOptConfig):
        out.update(_modelopt(parsed, file, prefix))
    elif isinstance(parsed, Mxfp4Config):
        if method == "mxfp4":
            out.update({"quant.scheme": "none", "quant.moe_scheme": "mxfp4"})  # gpt-oss: BF16 linears
        else:
            out["quant.scheme"] = "mxfp8"
        out["quant.scale_fmt"] = "ue8m0"
    elif isinstance(parsed, WeightOnlyIntConfig):
        out.update(_weight_only(parsed, file, prefix))
    if not isinstance(parsed, ModelOptConfig):
        out["quant.modelopt_algo"] = "none"
    if not isinstance(parsed, CompressedTensorsConfig):
        out["quant.input_transform"] = "none"  # only a compressed-tensors checkpoint carries one
    scheme = out.get("quant.scheme")
    if scheme == "w4a8":
        del out["quant.scheme"]
    if isinstance(scheme, str) and scheme in _BITS:
        out["quant.weight_bits"], out["quant.activation_bits"] = _BITS[scheme]
    if "quant.scale_fmt" not in out and isinstance(scheme, str) and scheme.startswith("fp8"):
        out["quant.scale_fmt"] = "fp32"
    return out


def _fp8(c: Fp8Config, file: str, prefix: str) -> dict[str, object]:
    out: dict[str, object] = {}
    if c.weight_block_size is not None:
        _positive(c.weight_block_size, f"{prefix}weight_block_size", file)
        out.update({"quant.scheme": "fp8_block", "quant.block": list(c.weight_block_size)})
        out["quant.moe_activation_scale"] = "per_group"  # 1 x block-width groups, at run time
    else:
        out["quant.scheme"] = "fp8_tensor" if c.quant_method == "fp8" else "fp8_channel"
    if c.activation_scheme is not None:
        out["quant.activation_scheme"] = c.activation_scheme
    if c.scale_fmt is not None:
        out["quant.scale_fmt"] = "ue8m0" if c.scale_fmt.lower() == "ue8m0" else "fp32"
    return out


def _group_size(value: int | None, field: str, file: str) -> None:
    """A group size is positive, or ``-1`` (GPTQ's one group per channel): ``0`` divides nothing
    (it was decided as Marlin's)."""
    if value is not None and value != -1 and value <= 0:
        raise ModelConfigError(
            file, field, f"expected a positive group size, or -1 for one per channel (got `{value}`)"
        )


def _positive(values: list[int], field: str, file: str) -> None:
    if any(v <= 0 for v in values):
        raise ModelConfigError(file, field, f"expected positive sizes (got `{values}`)")


def _ct_scheme(w: CtArgs, a: CtArgs | None) -> tuple[str | None, list[int] | None]:
    if w.type == "float" and w.num_bits == 8:
        if w.strategy == "block":
            return "fp8_block", list(w.block_structure or [128, 128])
        if w.strategy == "group" and w.group_size == 32:
            return "mxfp8", None
        return ("fp8_channel" if w.strategy == "channel" else "fp8_tensor"), None
    if w.type == "float" and w.num_bits == 4:
        return ("nvfp4" if (w.group_size or 16) == 16 else "mxfp4"), None
    if w.type == "int" and w.num_bits == 4:
        return ("w4a8" if a is not None and a.num_bits == 8 else "w4a16"), None
    if w.type == "int" and w.num_bits == 8 and a is None:
        return "w8a16", None
    return None, None


def _compressed_tensors(c: CompressedTensorsConfig, file: str, prefix: str) -> dict[str, object]:
    out: dict[str, object] = {}
    linear = [(n, g) for n, g in c.config_groups.items() if g.weights is not None]
    # the group that targets plain Linear layers decides; a group naming experts sets the MoE scheme
    dense = next(((n, g) for n, g in linear if "Linear" in g.targets), linear[0] if linear else None)
    if dense is None:
        return {"quant.method_known": False}
    name, group = dense
    assert group.weights is not None
    if group.weights.block_structure is not None:
        _positive(group.weights.block_structure, f"{prefix}config_groups.{name}.weights.block_structure", file)
    for n, g in linear:
        assert g.weights is not None
        _group_size(g.weights.group_size, f"{prefix}config_groups.{n}.weights.group_size", file)
    scheme, block = _ct_scheme(group.weights, group.input_activations)
    if scheme is None:
        out["quant.method_known"] = False
        return out
    out["quant.scheme"] = scheme
    if block is not None:
        out["quant.block"] = block
    if group.weights.group_size is not None:
        out["quant.group_size"] = group.weights.group_size
    acts = group.input_activations
    if acts is not None and acts.dynamic is not None:
        out["quant.activation_scheme"] = "static" if acts.dynamic is False else "dynamic"
    experts = group
    for _n, g in linear:
        if g is not group and g.weights is not None and any("expert" in t for t in g.targets):
            moe, _ = _ct_scheme(g.weights, g.input_activations)
            if moe is not None:
                out["quant.moe_scheme"] = moe
                experts = g
    scale = _CT_ACT_SCALE.get((experts.input_activations.strategy or "") if experts.input_activations else "")
    if scale is not None:
        out["quant.moe_activation_scale"] = scale
    return out


#: Hadamard block sizes vLLM 0.34's Humming NVFP4 kernel fuses into its input quantisation
_HADAMARD_BLOCKS: Final = (16, 32, 64, 128)


def _input_transform(tc: object, file: str, where: str) -> str | None:
    """``quant.input_transform`` of a compressed-tensors ``transform_config``: ``none`` without
    one, ``hadamard`` for Sylvester Hadamard transforms of one block size (16-128) applied to the
    inputs with none on the outputs (what vLLM 0.34 fuses), else unknown (``None``: another
    transform vLLM runs on its own path)."""
    if tc is None:
        return "none"
    if not isinstance(tc, Mapping):
        raise ModelConfigError(file, where, "expected a mapping")
    groups = tc.get("config_groups") or {}
    if not isinstance(groups, Mapping):
        raise ModelConfigError(file, f"{where}.config_groups", "expected a mapping")
    if not groups:
        return "none"
    inputs: list[Mapping[str, Any]] = []
    for name, group in groups.items():
        if not isinstance(group, Mapping) or not isinstance(group.get("apply", []), list):
            raise ModelConfigError(file, f"{where}.config_groups.{name}", "expected a mapping with an `apply` list")
        locations = {a.get("location") for a in group.get("apply", []) if isinstance(a, Mapping)}
        if "output" in locations:
            return None
        if "input" in locations:
            inputs.append(group)
    if not inputs:
        return "none"
    sizes = {g.get("head_dim") for g in inputs}
    plain = all(g.get("type") == "hadamard" for g in inputs)  # as vLLM's check: `random-hadamard` is not
    return "hadamard" if plain and len(sizes) == 1 and next(iter(sizes)) in _HADAMARD_BLOCKS else None


def _modelopt(c: ModelOptConfig, file: str, prefix: str) -> dict[str, object]:
    out: dict[str, object] = {}
    algo = (c.quant_algo or "").upper()
    if c.quant_method == "modelopt_fp4" and not algo:
        algo = "NVFP4"
    out["quant.modelopt_algo"] = algo if algo in _MODELOPT_DOMAIN else "other"
    if algo == "MIXED_PRECISION":
        layers = c.quantized_layers or {}
        moe = Counter(v.quant_algo.upper() for k, v in layers.items() if "expert" in k)
        dense = Counter(v.quant_algo.upper() for k, v in layers.items() if "expert" not in k)
        if not layers:
            raise ModelConfigError(file, f"{prefix}quantized_layers", "a MIXED_PRECISION checkpoint lists its layers")
        algo = (dense or moe).most_common(1)[0][0]
        if moe:
            moe_algo = moe.most_common(1)[0][0]
            moe_scheme = _MODELOPT_ALGOS.get(moe_algo)
            if moe_scheme is not None:
                out["quant.moe_scheme"] = moe_scheme
            if moe_algo in _MODELOPT_ACT_SCALE:
                out["quant.moe_activation_scale"] = _MODELOPT_ACT_SCALE[moe_algo]
    if "quant.moe_activation_scale" not in out and algo in _MODELOPT_ACT_SCALE:
        out["quant.moe_activation_scale"] = _MODELOPT_ACT_SCALE[algo]
    scheme = _MODELOPT_ALGOS.get(algo)
    if scheme is None:
        out["quant.method_known"] = False
        return out
    out["quant.scheme"] = scheme
    if scheme == "fp8_block":
        out["quant.block"] = [128, 128]
    _group_size(c.group_size, f"{prefix}group_size", file)
    if c.group_size is not None:
        out["quant.group_size"] = c.group_size
    if scheme.startswith("fp8"):
        out["quant.activation_scheme"] = "dynamic" if scheme != "fp8_tensor" else "static"
    return out


def _weight_only(c: WeightOnlyIntConfig, file: str, prefix: str) -> dict[str, object]:
    if c.bits not in (4, 8):
        raise ModelConfigError(file, f"{prefix}bits", f"expected 4 or 8 (got `{c.bits}`)")
    out: dict[str, object] = {"quant.scheme": "w4a16" if c.bits == 4 else "w8a16"}
    _group_size(c.group_size, f"{prefix}{'q_group_size' if c.quant_method.startswith('awq') else 'group_size'}", file)
    if c.group_size is not None:
        out["quant.group_size"] = c.group_size
    return out
