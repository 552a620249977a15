"""The FP8 layers of one deployment, per rank: their GEMM shapes from the model's config.json.

Pure functions of a config mapping (a real config.json or the shipped catalog's excerpt) and the
deployment's tensor- and expert-parallel sizes. Shapes follow how vLLM shards each layer:
column-parallel layers (QKV, MLA's ``q_b``/``kv_b``, gate/up) split N by TP, row-parallel ones
(``o_proj``, ``down``) split K by TP; replicated layers (MLA's fused ``q_a``/``kv_a``, the
router) keep theirs; routed experts split across EP ranks when EP is on, else their
intermediate size across TP. The routed experts are one layer (``experts``: w13, the activation,
w2, as the fused-MoE kernels run them) with N, K of w13. KV heads fewer than the TP ranks are replicated (one per rank).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import UsageError

__all__ = ["ATTENTION_CONTEXTS", "BLOCK", "Layer", "attention_layers", "layer_shapes"]

#: The block of block-FP8 checkpoints: a sharded N or K must stay a multiple of it.
BLOCK: Final = 128

#: Decode context lengths (tokens already in the KV cache) measured per attention layer.
ATTENTION_CONTEXTS: Final = (1024, 8192, 32768)
#: Decode batches (sequences) and prefill lengths (new tokens of one sequence) measured.
ATTENTION_DECODE_MS: Final = (1, 16, 64)
ATTENTION_PREFILL_MS: Final = (1024, 8192, 32768)

#: config.json keys naming the text model's settings inside a multimodal config.
_TEXT_KEYS: Final = ("text_config", "language_config", "llm_config")

#: MLA's config keys (DeepSeek-V2/V3/R1, Kimi-K2, GLM-4.5's MLA variants use the same names).
_MLA_KEYS: Final = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


@dataclass(frozen=True)
class Layer:
    """One linear layer of one rank: ``out = x @ W.T`` with ``W`` of shape (*n*, *k*).

    *experts* is the number of experts a rank holds (MoE layers; 1 otherwise); *note* says
    what a shape stands for when it is not plain (replicated, padded for the block).
    """

    path: str  #: ``dense``, ``moe`` or ``router``
    name: str  #: vLLM's module name (``qkv_proj``, ``mlp.gate_up_proj``, ``experts.w13``, ...)
    n: int
    k: int
    experts: int = 1
    note: str = ""
    topk: int = 0  #: MoE: experts each token is routed to (all ranks)
    total_experts: int = 0  #: MoE: experts over all ranks (the rank holds the first *experts*)
    #: attention (*n* query heads, *k* the head size): KV heads per rank, the phase (``decode``:
    #: M sequences of *context* tokens, one new token each; ``prefill``: one sequence of M new
    #: tokens, causal), the KV-cache dtype (``bf16`` or ``fp8``)
    kv_heads: int = 0
    phase: str = ""
    context: int = 0
    kv_dtype: str = ""
    ms: tuple[int, ...] = ()  #: the token counts this layer is measured at (empty: the run's)

    @property
    def block_aligned(self) -> bool:
        """Whether N and K are whole blocks (what block-FP8 kernels need; N may end in a part block)."""
        return self.k % BLOCK == 0

    def label(self) -> str:
        if self.path == "attention":
            ctx = f", context {self.context}" if self.phase == "decode" else ""
            return f"{self.name} ({self.n}q/{self.kv_heads}kv heads x {self.k}, {self.kv_dtype} cache{ctx})"
        if self.path == "moe":  # the whole expert computation: w13 (2I x H), then w2 (H x I)
            e = self.experts
            return f"{self.name} ({e}x{self.n}x{self.k} + {e}x{self.k}x{self.n // 2}, top-{self.topk})"
        dims = f"{self.n}x{self.k}" if self.experts == 1 else f"{self.experts}x{self.n}x{self.k}"
        return f"{self.name} ({dims})"


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in _TEXT_KEYS:
        inner = config.get(key)
        if isinstance(inner, Mapping) and "hidden_size" in inner:
            return inner
    return config


def _int(cfg: Mapping[str, Any], key: str, model: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise UsageError(
            f"`{model}`: config.json has no `{key}`, which bench needs for the layer shapes",
            help="give a folder with the checkpoint's full config.json (--model PATH)",
        )
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UsageError(f"`{model}`: config.json `{key}` is `{value}`, expected a positive integer")
    return value


def _count(cfg: Mapping[str, Any], key: str, model: str) -> int:
    """An optional count or size of config.json (absent or null: 0); one of another kind is
    refused (bench read `"two"` shared experts as an internal error)."""
    value = cfg.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        shown = repr(value) if len(repr(value)) <= 40 else type(value).__name__
        raise UsageError(f"`{model}`: config.json `{key}` is `{shown}`, expected an integer of 0 or more")
    return value


def _split(total: int, parts: int, what: str, model: str) -> int:
    if total % parts:
        raise UsageError(f"`{model}`: {what} ({total}) does not split over {parts} ranks")
    return total // parts


def _attention(cfg: Mapping[str, Any], model: str, tp: int) -> list[Layer]:
    hidden = _int(cfg, "hidden_size", model)
    heads = _int(cfg, "num_attention_heads", model)
    if all(k in cfg for k in _MLA_KEYS) and cfg.get("kv_lora_rank"):
        q_lora = _count(cfg, "q_lora_rank", model)
        nope, rope = _int(cfg, "qk_nope_head_dim", model), _int(cfg, "qk_rope_head_dim", model)
        v_head, kv_lora = _int(cfg, "v_head_dim", model), _int(cfg, "kv_lora_rank", model)
        local = _split(heads, tp, "num_attention_heads", model)
        out: list[Layer] = []
        if q_lora:
            out.append(Layer("dense", "fused_qkv_a_proj", q_lora + kv_lora + rope, hidden, note="replicated"))
            out.append(Layer("dense", "q_b_proj", local * (nope + rope), q_lora))
        else:
            out.append(Layer("dense", "kv_a_proj_with_mqa", kv_lora + rope, hidden, note="replicated"))
            out.append(Layer("dense", "q_proj", local * (nope + rope), hidden))
        out.append(Layer("dense", "kv_b_proj", local * (nope + v_head), kv_lora))
        out.append(Layer("dense", "o_proj", hidden, local * v_head))
        return out
    head_dim = _int(cfg, "head_dim", model, hidden // heads if hidden % heads == 0 else None)
    kv_heads = _int(cfg, "num_key_value_heads", model, heads)
    local_q = _split(heads, tp, "num_attention_heads", model)
    local_kv = max(1, kv_heads // tp) if tp >= kv_heads else _split(kv_heads, tp, "num_key_value_heads", model)
    note = "KV heads replicated" if tp > kv_heads else ""
    return [
        Layer("dense", "qkv_proj", (local_q + 2 * local_kv) * head_dim, hidden, note=note),
        Layer("dense", "o_proj", hidden, local_q * head_dim),
    ]


def _experts(cfg: Mapping[str, Any]) -> int:
    for key in ("n_routed_experts", "num_experts", "num_local_experts"):
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _mlp(cfg: Mapping[str, Any], model: str, tp: int, ep: int) -> list[Layer]:
    hidden = _int(cfg, "hidden_size", model)
    experts = _experts(cfg)
    out: list[Layer] = []
    dense_layers = experts == 0 or _count(cfg, "first_k_dense_replace", model) > 0
    if dense_layers:
        inter = _split(_int(cfg, "intermediate_size", model), tp, "intermediate_size", model)
        out += [Layer("dense", "mlp.gate_up_proj", 2 * inter, hidden), Layer("dense", "mlp.down_proj", hidden, inter)]
    if experts == 0:
        return out
    moe_inter = _int(cfg, "moe_intermediate_size", model, cfg.get("intermediate_size"))
    shared = _count(cfg, "n_shared_experts", model) * moe_inter or _count(cfg, "shared_expert_intermediate_size", model)
    if shared:
        local = _split(shared, tp, "the shared experts' intermediate size", model)
        out += [
            Layer("dense", "shared_experts.gate_up_proj", 2 * local, hidden),
            Layer("dense", "shared_experts.down_proj", hidden, local),
        ]
    if ep > 1:
        local_e, local_i, how = _split(experts, ep, "the routed experts", model), moe_inter, f"EP {ep}"
    else:
        local_e, local_i, how = experts, _split(moe_inter, tp, "moe_intermediate_size", model), f"TP {tp}"
    note = f"{local_e} of {experts} experts per rank ({how})"
    topk = _int(cfg, "num_experts_per_tok", model, 1)
    out += [  # one MoE layer: w13 (2I x H), the activation, w2 (H x I), as the fused kernels run them
        Layer("moe", "experts", 2 * local_i, hidden, experts=local_e, note=note, topk=topk, total_experts=experts),
        Layer("router", "gate", experts, hidden, note="replicated"),
    ]
    return out


def layer_shapes(config: Mapping[str, Any], *, model: str, tp: int = 1, ep: int = 1) -> tuple[Layer, ...]:
    """The distinct FP8 layers of one rank of *model* under tensor-parallel *tp* and
    expert-parallel *ep* (vLLM's EP spans the TP ranks: ``ep`` is 1 or the EP group's size).

    :raises UsageError: a key the shapes need is missing or a size does not split over the ranks.
    """
    if tp < 1 or ep < 1:
        raise UsageError(f"`{model}`: TP ({tp}) and EP ({ep}) must be at least 1")
    cfg = _text(config)
    return tuple(_attention(cfg, model, tp) + _mlp(cfg, model, tp, ep))


def attention_layers(config: Mapping[str, Any], *, model: str = "", tp: int = 1, kv_dtype: str = "bf16") -> list[Layer]:
    """The attention of one rank as cells: decode at each of :data:`ATTENTION_CONTEXTS` (batches of
    :data:`ATTENTION_DECODE_MS` sequences) and prefill (:data:`ATTENTION_PREFILL_MS` new tokens).
    MLA models (their latent cache needs the MLA kernels) have none: bench runs MHA/GQA only.

    :raises UsageError: a config without the head counts.
    """
    cfg = _text(config)
    if "kv_lora_rank" in cfg:
        return []
    try:
        heads = int(cfg["num_attention_heads"])
        kv = int(cfg.get("num_key_value_heads") or heads)
        head = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"`{model or 'the model'}`: config.json has no attention head counts") from None
    if heads % tp:
        raise UsageError(f"`{model or 'the model'}`: {heads} attention heads do not split over TP {tp}")
    hq, hkv = heads // tp, max(1, kv // tp)
    out = [
        Layer("attention", f"attn.decode.{ctx // 1024}k", hq, head, kv_heads=hkv, phase="decode", context=ctx,
              kv_dtype=kv_dtype, ms=ATTENTION_DECODE_MS)
        for ctx in ATTENTION_CONTEXTS
    ]  # fmt: skip
    out.append(
        Layer("attention", "attn.prefill", hq, head, kv_heads=hkv, phase="prefill", kv_dtype=kv_dtype,
              ms=ATTENTION_PREFILL_MS)
    )  # fmt: skip
    return out
