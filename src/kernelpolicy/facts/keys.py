"""The fact vocabulary: every key a fact may have, its kind, its domain and what it means.

This table is the single source of truth for fact keys. The rule loader checks every key a
rule mentions against it, the facts record validates values against it, and the exhaustive
checker enumerates the finite domains declared here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, NamedTuple

__all__ = [
    "ACTIVATION_SCALES",
    "BACKENDS",
    "CANONICAL",
    "DECIDED_PATHS",
    "FACT_KEYS",
    "GPU_FAMILIES",
    "GPU_SMS",
    "MOE_ROUTINGS",
    "PATHS",
    "PROBE_OUTCOMES",
    "QUANT_SCHEMES",
    "SHAPE_ALIGNS",
    "Canonical",
    "FactKey",
    "Kind",
    "lookup_key",
]


class Kind(str, Enum):
    """How a fact's value is typed and compared."""

    ENUM = "enum"  #: one of a finite set of strings
    STR = "str"  #: an open string
    VERSION = "version"  #: a PEP 440 version; conditions may use specifiers
    BOOL = "bool"
    INT = "int"  #: conditions may use numeric comparisons
    INT_LIST = "int_list"  #: e.g. a weight block size
    STR_LIST = "str_list"


_COMMIT: Final = re.compile(r"[0-9a-f]{7,40}")


def short_commit(text: str) -> str | None:
    """A git revision as its first 7 hex digits, or ``None`` when *text* is not one."""
    low = text.strip().lower()
    return low[:7] if _COMMIT.fullmatch(low) else None


class Canonical(NamedTuple):
    """How the values of a STR key are written canonically."""

    form: Callable[[str], str | None]  #: the canonical form, ``None`` when the text is not a value
    what: str  #: what a valid value is, for the error line
    spare: Callable[[frozenset[str]], str]  #: a valid value none of those given is (for the check)


def _spare_commit(taken: frozenset[str]) -> str:
    return next(c for c in (f"{i:07x}" for i in range(len(taken) + 1)) if c not in taken)


#: STR keys whose values have one canonical form, in facts and in rule conditions alike.
CANONICAL: Final[Mapping[str, Canonical]] = {
    "deep_gemm.commit": Canonical(short_commit, "a git commit (7 to 40 hex digits)", _spare_commit)
}


@dataclass(frozen=True)
class FactKey:
    """One entry of the vocabulary."""

    name: str
    kind: Kind
    doc: str
    domain: tuple[str, ...] = ()  #: the finite domain of an ENUM key
    example: str = ""


#: Exact compute capabilities kernelpolicy knows, as ``gpu.sm`` values.
GPU_SMS: Final = (
    "sm80",
    "sm86",
    "sm87",
    "sm89",
    "sm90",
    "sm100",
    "sm103",
    "sm110",
    "sm120",
    "sm121",
)
#: ``major*10`` families, as vLLM's ``is_device_capability_family`` sees them.
GPU_FAMILIES: Final = ("sm80", "sm90", "sm100", "sm110", "sm120")
QUANT_SCHEMES: Final = (
    "none",
    "fp8_block",
    "fp8_tensor",
    "fp8_channel",
    "mxfp8",
    "nvfp4",
    "mxfp4",
    "w4a16",
    "w8a16",
)
#: Code paths a decision covers. ``warmup`` is derived from the others.
PATHS: Final = ("dense", "moe", "router", "attention", "warmup")
#: The paths the resolver decides (every path but ``warmup``).
DECIDED_PATHS: Final = PATHS[:-1]
#: Backend ids per path (engine-neutral; adapters map them to engine names).
BACKENDS: Final[dict[str, tuple[str, ...]]] = {
    "dense": (
        "deep_gemm",
        "flashinfer_deep_gemm",
        "cutlass",
        "flashinfer_cutlass",
        "flashinfer_trtllm",
        "flashinfer_cutedsl",
        "b12x",
        "marlin",
        "humming",
        "humming_hadamard",
        "triton",
        "torch",
        "emulation",
    ),
    "moe": (
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "flashinfer_cutlass",
        "flashinfer_cutedsl",
        "flashinfer_b12x",
        "flashinfer_megamoe",
        "deep_gemm",
        "deep_gemm_mega_moe",
        "vllm_cutlass",
        "triton",
        "marlin",
        "humming",
        "aiter",
        "emulation",
    ),
    "router": ("bf16x3", "fp32_gemv", "dsv3", "tiny_gemm", "cublas", "ll_bf16", "linear", "linear_fp32"),
    # attention (issue #39): kernel families, one id for a family's MHA and MLA kernels (vLLM's
    # FLASHINFER and FLASHINFER_MLA are `flashinfer`, as SGLang's `flashinfer` is both); vLLM runs
    # TRT-LLM attention inside its `flashinfer` backend, SGLang names it (`trtllm_mha`, `trtllm_mla`)
    "attention": (
        "flash_attn",
        "flashinfer",
        "trtllm_mha",
        "trtllm_mla",
        "flashmla",
        "cutlass_mla",
        "triton_attn",
        "flex_attention",
        "flashmla_sparse",
        "flashinfer_mla_sparse",
    ),
}

_E = Kind.ENUM
_VERSION_PACKAGES: Final = (
    ("vllm", "the installed vLLM release", "0.26.0"),
    ("sglang", "the installed SGLang release", "0.5.23"),
    ("deep_gemm", "the DeepGEMM in use (external or vLLM's vendored copy)", "2.8.1"),
    ("triton", "the installed Triton", "3.6.0"),
    ("cutlass_dsl", "the installed nvidia-cutlass-dsl (CuTe DSL)", "4.6.0"),
    ("flashinfer", "the installed flashinfer-python", "0.6.14"),
    ("torch", "the installed PyTorch", "2.11.0"),
    ("cuda", "the CUDA runtime version torch was built with", "13.0"),
    ("driver", "the NVIDIA driver version (NVML)", "580.126.20"),
    ("b12x", "the optional `b12x` kernel package (vllm[b12x])", "0.1.0"),
    ("humming", "the optional `humming` kernel package", "0.1.0"),
)

_ALL: list[FactKey] = [
    FactKey("gpu.sm", _E, "exact compute capability", GPU_SMS, "sm121"),
    FactKey("gpu.family", _E, "`major*10`: the capability family", GPU_FAMILIES, "sm120"),
    FactKey("gpu.cc", Kind.VERSION, "the compute capability as a version string", (), "12.1"),
    FactKey("gpu.name", Kind.STR, "the product name NVML reports", (), "NVIDIA GB10"),
    FactKey("gpu.count", Kind.INT, "number of visible GPUs", (), "1"),
    FactKey(
        "gpu.unified_memory",
        Kind.BOOL,
        "the GPU shares system memory (GB10, Jetson Thor): NVML has no memory info",
        (),
        "true",
    ),
    FactKey("host.machine", _E, "CPU architecture of the host", ("x86_64", "aarch64"), "aarch64"),
    FactKey("model.type", Kind.STR, "the text model's `model_type`", (), "qwen3_5_moe_text"),
    FactKey(
        "model.architecture",
        Kind.STR,
        "`architectures[0]` of config.json",
        (),
        "Qwen3_5MoeForConditionalGeneration",
    ),
    FactKey("model.is_moe", Kind.BOOL, "the model has fused-MoE layers", (), "true"),
    FactKey("model.num_experts", Kind.INT, "routed experts per MoE layer", (), "256"),
    FactKey("model.hidden_size", Kind.INT, "hidden size of the text model", (), "2048"),
    FactKey(
        "model.intermediate_size",
        Kind.INT,
        "per-expert FFN width for MoE models, dense FFN width otherwise",
        (),
        "512",
    ),
    FactKey(
        "model.router_dtype",
        _E,
        "dtype of the MoE gate weight in the checkpoint",
        ("bfloat16", "float16", "float32"),
        "bfloat16",
    ),
    FactKey(
        "model.activation",
        _E,
        "MoE expert activation",
        ("silu", "gelu", "relu2", "swigluoai", "swiglustep", "other"),
        "silu",
    ),
    FactKey("quant.method", Kind.STR, "`quantization_config.quant_method`", (), "fp8"),
    FactKey("quant.scheme", _E, "quantization scheme of the linear layers", QUANT_SCHEMES, "fp8_block"),
    FactKey(
        "quant.moe_scheme",
        _E,
        "quantization scheme of the experts (defaults to `quant.scheme`)",
        QUANT_SCHEMES,
        "mxfp4",
    ),
    FactKey("quant.block", Kind.INT_LIST, "weight block size", (), "[128, 128]"),
    FactKey("quant.scale_fmt", _E, "checkpoint scale format", ("ue8m0", "fp32"), "ue8m0"),
    FactKey(
        "deep_gemm.commit",
        Kind.STR,
        "the DeepGEMM source revision of the build in use, as its first 7 hex digits (git's short "
        "form: `891d57b4db10…`, `891d57b4` and `891d57b` are one commit, in facts and in rules alike)",
        (),
        "891d57b",
    ),
    FactKey(
        "deep_gemm.has_sm120_sf_layout",
        Kind.BOOL,
        "the DeepGEMM build in use has the SM120 scale-factor transform",
        (),
        "false",
    ),
    FactKey(
        "deep_gemm.source",
        _E,
        "which DeepGEMM vLLM loads: an external `deep_gemm` or its vendored copy",
        ("external", "vendored", "none"),
        "vendored",
    ),
    FactKey(
        "deploy.engine",
        _E,
        "the inference engine that runs the deployment: `vllm` unless `--engine sglang==X`, the SGLang"
        " plugin or a fact says `sglang` (rules that hold on one engine only name it)",
        ("vllm", "sglang"),
        "vllm",
    ),
    FactKey("deploy.tp", Kind.INT, "tensor-parallel size", (), "1"),
    FactKey("deploy.ep", Kind.INT, "expert-parallel size", (), "1"),
    FactKey(
        "deploy.moe_backend",
        Kind.STR,
        "explicit MoE backend (a kernelpolicy id; engine names are aliases)",
        (),
        "triton",
    ),
    FactKey(
        "deploy.linear_backend",
        Kind.STR,
        "explicit dense-linear backend (a kernelpolicy id)",
        (),
        "cutlass",
    ),
    FactKey("deploy.all2all", Kind.STR, "expert-parallel all-to-all backend", (), "deepep_low_latency"),
    FactKey("vllm.cuda_archs", Kind.STR_LIST, "archs the installed vLLM was compiled for", (), "[sm_90]"),
]
_ALL += [FactKey(f"{p}.version", Kind.VERSION, d, (), ex) for p, d, ex in _VERSION_PACKAGES]

# --- machine facts (issue #5: facts from the real machine) -------------------------------
# Added by the machine-facts engineer; gathered by ``kernelpolicy.facts.providers``. Every key
# here is optional: a rule that needs one and finds it unknown follows the unknown-fact rules.
#: Results of a live probe in a subprocess (see ``deep_gemm.sf_probe_*``).
PROBE_OUTCOMES: Final = ("ok", "unsupported", "error", "crashed", "timeout", "unavailable")
_ALL += [
    FactKey("gpu.arch", Kind.STR, "NVML's architecture name of the GPU", (), "blackwell"),
    FactKey(
        "gpu.memory_mib",
        Kind.INT,
        "total GPU memory (NVML); unknown on unified memory",
        (),
        "143771",
    ),
    FactKey(
        "gpu.has_tcgen05",
        Kind.BOOL,
        "the GPU has `tcgen05` (TMEM) MMA: datacenter Blackwell sm100/sm103 only, never sm12x",
        (),
        "false",
    ),
    FactKey(
        "driver.cuda_version",
        Kind.VERSION,
        "the CUDA version the driver supports (NVML)",
        (),
        "13.0",
    ),
    FactKey("host.system", Kind.STR, "the host operating system (`platform.system()`)", (), "Linux"),
    FactKey("host.python", Kind.VERSION, "the Python that gathered the facts", (), "3.12.3"),
    FactKey(
        "torch.cuda_archs",
        Kind.STR_LIST,
        "SASS targets of the installed torch (`torch.cuda.get_arch_list()`, `sm_*` only)",
        (),
        "[sm_90, sm_100, sm_120]",
    ),
    FactKey(
        "torch.arch_ok",
        Kind.BOOL,
        "torch ships SASS that runs on this GPU: some `sm_{major}{m}` with m <= minor",
        (),
        "true",
    ),
    FactKey(
        "triton.sm90a_ok",
        Kind.BOOL,
        "Triton compiles for `sm_90a` (by version, or a compile probe)",
        (),
        "true",
    ),
    FactKey(
        "triton.sm100a_ok",
        Kind.BOOL,
        "Triton compiles for `sm_100a` (by version, or a compile probe)",
        (),
        "true",
    ),
    FactKey(
        "triton.sm120a_ok",
        Kind.BOOL,
        "Triton compiles for `sm_120a`: Triton >= 3.3.0 (by version, or a compile probe)",
        (),
        "true",
    ),
    FactKey(
        "triton.sm121a_ok",
        Kind.BOOL,
        "Triton compiles for `sm_121a`: Triton >= 3.6.0 (by version, or a compile probe)",
        (),
        "false",
    ),
    FactKey(
        "cutlass_dsl.sm121a_ok",
        Kind.BOOL,
        "the CuTe DSL emits `sm_121a` code (nvidia-cutlass-dsl >= 4.6.0); says nothing of tcgen05",
        (),
        "true",
    ),
    FactKey(
        "deep_gemm.dist",
        Kind.STR,
        "the distribution that installed the DeepGEMM in use (`vllm` for the vendored copy)",
        (),
        "sgl-deep-gemm",
    ),
    FactKey(
        "deep_gemm.sf_probe_fp32",
        _E,
        "live probe: FP32 scale factors, recipe (1, 128), UE8M0 cast off (the SM90 layout)",
        PROBE_OUTCOMES,
        "ok",
    ),
    FactKey(
        "deep_gemm.sf_probe_ue8m0",
        _E,
        "live probe: FP32 scales packed to UE8M0, recipe (1, 1, 32) (the SM100/SM120 layout);"
        ' `unsupported` is "Unknown SF transformation"',
        PROBE_OUTCOMES,
        "unsupported",
    ),
]
# --- end of machine facts -----------------------------------------------------------------

# --- MoE knowledge (issue #9): routing, ModelOpt algorithm, serving limits ----------------
#: How the router turns logits into expert weights, in FlashInfer/TRT-LLM's names (vLLM's
#: ``RoutingMethodType`` since 0.33; older vLLM called softmax-then-renormalise "Renormalize").
MOE_ROUTINGS: Final = (
    "default",  #: softmax -> top-k
    "renormalize",  #: top-k -> softmax over the chosen experts
    "renormalize_naive",  #: softmax -> top-k -> renormalise (Qwen3 MoE, Mixtral: `norm_topk_prob`)
    "deepseek_v3",  #: sigmoid + bias, top groups, then top-k (`n_group`, `topk_group`)
    "llama4",  #: top-1 -> sigmoid
    "minimax",  #: sigmoid + bias -> top-k -> scaled renormalise (MiniMax-M2)
    "other",
)
_ALL += [
    FactKey(
        "model.moe_routing",
        _E,
        "MoE routing method; from config.json (`scoring_func`, `norm_topk_prob`, `n_group`,"
        " `e_score_correction_bias`) or implied by `model.type` (rules/known/moe_routing.yaml);"
        " settable with --fact",
        MOE_ROUTINGS,
        "renormalize_naive",
    ),
    FactKey(
        "quant.modelopt_algo",
        _E,
        "NVIDIA ModelOpt `quant_algo` (hf_quant_config.json or `quantization_config.quant_algo`);"
        " `none` for other checkpoints",
        ("FP8", "FP8_PB_WO", "FP8_PER_CHANNEL_PER_TOKEN", "NVFP4", "MXFP8", "MIXED_PRECISION", "none", "other"),
        "FP8_PB_WO",
    ),
    FactKey(
        "vllm.trtllm_moe_monolithic",
        Kind.BOOL,
        "vLLM runs FlashInfer's TRT-LLM MoE as the monolithic kernel (routing inside the kernel,"
        " from router logits) rather than the modular one (routing in Python, routed kernel);"
        " vLLM picks it per routing method; settable with --fact",
        (),
        "true",
    ),
    FactKey(
        "deploy.max_num_batched_tokens",
        Kind.INT,
        "vLLM `--max-num-batched-tokens`: the most tokens one forward pass (and the MoE GEMMs) sees",
        (),
        "8192",
    ),
    FactKey(
        "deploy.kv_cache_dtype",
        _E,
        "vLLM `--kv-cache-dtype` (`fp8` is `fp8_e4m3`)",
        ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4"),
        "fp8",
    ),
    FactKey(
        "deploy.lora",
        Kind.BOOL,
        "vLLM `--enable-lora`: LoRA adapters are served, so MoE layers run the LoRA-aware experts",
        (),
        "false",
    ),
]
# --- end of MoE knowledge -----------------------------------------------------------------

# --- dense knowledge (issue #9): JIT toolchain, libraries, activations, graphs ------------
_ALL += [
    FactKey(
        "gpu.has_fp8",
        Kind.BOOL,
        "the GPU has FP8 (E4M3/E5M2) tensor-core MMA: sm89 (Ada) and later, not sm80-sm87"
        " (Ampere); implied by `gpu.sm` (rules/implies/gpu.yaml)",
        (),
        "true",
    ),
    FactKey(
        "nvcc.version",
        Kind.VERSION,
        "the CUDA toolkit whose nvcc JIT compilers (DeepGEMM, FlashInfer) will run: `$CUDA_HOME/bin/nvcc`,"
        " else `nvcc` on PATH (`nvcc --version`, with a timeout); not the CUDA torch was built with",
        (),
        "12.8",
    ),
    FactKey(
        "cudnn.version",
        Kind.VERSION,
        "the cuDNN torch loads: metadata of the `nvidia-cudnn-cu12`/`-cu13` wheel",
        (),
        "9.10.2.21",
    ),
    FactKey(
        "flashinfer_cubin.version",
        Kind.VERSION,
        "the installed `flashinfer-cubin` (FlashInfer's precompiled kernels; must match flashinfer-python)",
        (),
        "0.6.13",
    ),
    FactKey(
        "flashinfer_jit_cache.version",
        Kind.VERSION,
        "the installed `flashinfer-jit-cache` (FlashInfer's AOT-built JIT modules, per CUDA build)",
        (),
        "0.6.3",
    ),
    FactKey(
        "flashinfer.cubin_matches",
        Kind.BOOL,
        "flashinfer-cubin (and flashinfer-jit-cache, when installed) have flashinfer-python's"
        " version, or FLASHINFER_DISABLE_VERSION_CHECK=1: FlashInfer's start-up check passes"
        " (package metadata)",
        (),
        "true",
    ),
    FactKey(
        "model.activation_dtype",
        _E,
        "the dtype activations run in: vLLM `--dtype`, else config.json's `torch_dtype`",
        ("bfloat16", "float16", "float32"),
        "bfloat16",
    ),
    FactKey(
        "deploy.cuda_graphs",
        Kind.BOOL,
        "CUDA graphs are captured (vLLM's default); false with `--enforce-eager`",
        (),
        "true",
    ),
]
# --- end of dense knowledge ---------------------------------------------------------------

# --- model configs (issue #10): what config.json's typed parser reads (facts/quant.py) ----
_ALL += [
    FactKey(
        "model.experts_per_token",
        Kind.INT,
        "experts each token is routed to: config.json `num_experts_per_tok`",
        (),
        "8",
    ),
    FactKey(
        "quant.method_known",
        Kind.BOOL,
        "kernelpolicy parses this `quant_method` (fp8, compressed-tensors, modelopt, mxfp4, mxfp8,"
        " gptq/awq and their Marlin forms); false for any other method or an unrecognised scheme",
        (),
        "true",
    ),
    FactKey(
        "quant.activation_scheme",
        _E,
        "how activation scales are found: `static` (calibrated, in the checkpoint) or `dynamic`"
        " (per forward); config.json `activation_scheme`, compressed-tensors `input_activations.dynamic`",
        ("static", "dynamic"),
        "dynamic",
    ),
    FactKey(
        "quant.group_size",
        Kind.INT,
        "weight quantization group size: compressed-tensors/ModelOpt `group_size` (16 for NVFP4,"
        " 32 for MX formats), GPTQ/AWQ `group_size` (-1: per channel)",
        (),
        "16",
    ),
    FactKey(
        "quant.weight_bits",
        Kind.INT,
        "bits per weight of the linear layers (8 for FP8, 4 for FP4 and W4A*); from the quant config",
        (),
        "4",
    ),
    FactKey(
        "quant.activation_bits",
        Kind.INT,
        "bits per activation entering the GEMM (16 for weight-only W4A16/W8A16, 8 for W4A8/FP8)",
        (),
        "8",
    ),
]
# --- end of model configs -----------------------------------------------------------------

# --- layer shapes (issue #24): what kernels' alignment limits read, per rank ----------------
#: How far the per-rank MoE intermediate size is aligned: the largest of these powers of two that
#: divides it (``other``: none does). A finite domain, so the exhaustive check can walk it.
SHAPE_ALIGNS: Final = ("128", "64", "32", "16", "other")
_ALL += [
    FactKey(
        "deploy.moe_intermediate_per_rank",
        Kind.INT,
        "each rank's slice of the expert FFN width: `model.intermediate_size` divided by the MoE's"
        " tensor-parallel degree (`deploy.tp` over `deploy.ep`, at least 1: expert parallelism keeps"
        " experts whole); derived when the facts are assembled, unknown when the split is uneven",
        (),
        "176",
    ),
    FactKey(
        "deploy.moe_intermediate_align",
        _E,
        "the largest of 128, 64, 32, 16 dividing `deploy.moe_intermediate_per_rank` (`other`: none"
        " does); the gate+up GEMM has twice as many rows, so `64` means those rows are 128-aligned",
        SHAPE_ALIGNS,
        "16",
    ),
]
# --- end of layer shapes -------------------------------------------------------------------

# --- format variants (issue #35): how a checkpoint's experts are scaled, mixed or requantised ----
#: How activations entering the experts are scaled above their blocks (``quant.moe_activation_scale``).
ACTIVATION_SCALES: Final = ("per_tensor", "per_token", "per_group")
_ALL += [
    FactKey(
        "quant.moe_activation_scale",
        _E,
        "how the experts' activations are scaled, from the checkpoint's quantization config:"
        " `per_tensor` (one calibrated scale per tensor: a serialized ModelOpt NVFP4 or FP8"
        " checkpoint's `input_scale`, compressed-tensors `strategy: tensor` or `tensor_group`),"
        " `per_token` (one per token at run time: compressed-tensors `strategy: token`, ModelOpt"
        " FP8_PER_CHANNEL_PER_TOKEN), `per_group` (block FP8's 1 x 128 groups, MXFP8's 32); unknown"
        " for BF16 activations. An engine may override it (SGLang's"
        " `SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION=1`, vLLM 0.34's `--quantization-config`"
        " `moe.activation: nvfp4_per_token`: state the fact then)",
        ACTIVATION_SCALES,
        "per_tensor",
    ),
    FactKey(
        "quant.mixed",
        Kind.BOOL,
        "the experts are quantized otherwise than the linear layers (`quant.moe_scheme` differs from"
        " `quant.scheme`: a ModelOpt MIXED_PRECISION checkpoint with MXFP8 linears and NVFP4 experts,"
        " a compressed-tensors group for the experts); derived from the quantization config",
        (),
        "true",
    ),
    FactKey(
        "quant.moe_requant",
        _E,
        "what the engine requantises block-FP8 experts to at load: vLLM 0.34's `VLLM_FP8_MOE_REQUANT`"
        " (`mxfp4`: dequantized and stored as MXFP4). vLLM reads it on ROCm only: on an NVIDIA GPU"
        " the experts stay block FP8 and the MoE kernels are chosen for `fp8_block`",
        ("none", "mxfp4"),
        "mxfp4",
    ),
    FactKey(
        "quant.moe_requant_act",
        _E,
        "the activations of requantised MXFP4 experts: vLLM 0.34's `VLLM_FP8_MOE_REQUANT_ACT` (`a8w4`"
        " FP8 per token, its default; `a4w4` MXFP4; `a16w4` BF16)",
        ("a8w4", "a4w4", "a16w4"),
        "a8w4",
    ),
    FactKey(
        "quant.input_transform",
        _E,
        "a transform the checkpoint applies to the linear layers' inputs before quantising them:"
        " `hadamard` for a compressed-tensors `transform_config` of Sylvester Hadamard input"
        " transforms of one block size in 16, 32, 64, 128 (none on the outputs), which vLLM 0.34"
        " fuses into Humming's NVFP4 input quantisation; `none` for a checkpoint without one",
        ("none", "hadamard"),
        "hadamard",
    ),
]
# --- end of format variants ------------------------------------------------------------------
# --- attention and the KV cache (issue #39): the fifth path -------------------------------
_ALL += [
    FactKey(
        "model.head_size",
        Kind.INT,
        "the head size the attention kernel sees: config.json `head_dim`, else `hidden_size` /"
        " `num_attention_heads`; for MLA `kv_lora_rank + qk_rope_head_dim` (576 for DeepSeek-V3)",
        (),
        "128",
    ),
    FactKey(
        "model.mla",
        Kind.BOOL,
        "the model uses multi-head latent attention (config.json has `kv_lora_rank`): only the MLA backends run it",
        (),
        "true",
    ),
    FactKey("model.kv_lora_rank", Kind.INT, "MLA: config.json `kv_lora_rank` (the latent KV width)", (), "512"),
    FactKey("model.qk_rope_head_dim", Kind.INT, "MLA: config.json `qk_rope_head_dim`", (), "64"),
    FactKey(
        "model.sparse_attention",
        Kind.BOOL,
        "the model's MLA attends to the top-k tokens an indexer picks (config.json `index_topk`:"
        " DeepSeek-V3.2): only the sparse MLA backends run it",
        (),
        "false",
    ),
    FactKey(
        "model.sliding_window",
        Kind.BOOL,
        "some attention layers attend within a sliding window (config.json `sliding_window`, or"
        " `layer_types` naming `sliding_attention`)",
        (),
        "true",
    ),
    FactKey(
        "model.attention_sinks",
        Kind.BOOL,
        "the attention has learned per-head sink logits (gpt-oss); implied by `model.type`"
        " (rules/known/attention_model.yaml)",
        (),
        "true",
    ),
    FactKey(
        "deploy.calculate_kv_scales",
        Kind.BOOL,
        "vLLM `--calculate-kv-scales`: the FP8 KV-cache scales are computed from the first batches"
        " instead of read from the checkpoint",
        (),
        "false",
    ),
    FactKey(
        "deploy.block_size",
        Kind.INT,
        "vLLM `--block-size`, SGLang `--page-size`: tokens per KV-cache block (unknown: the engine's default)",
        (),
        "16",
    ),
    FactKey(
        "deploy.attention_backend",
        Kind.STR,
        "explicit attention backend (a kernelpolicy id; vLLM `--attention-backend` and SGLang"
        " `--attention-backend` names are aliases)",
        (),
        "flashinfer",
    ),
]
# --- end of attention ---------------------------------------------------------------------
# --- serving modes (issue #35): what a launch line says about how the engine serves ----------
#: ``deploy.speculative``'s values: vLLM's method names (its per-model MTP methods are ``mtp``)
#: and SGLang's algorithms (``NEXTN`` is ``mtp``, ``STANDALONE`` is ``draft_model``).
SPECULATIVE_METHODS: Final = (
    "none",
    "eagle",
    "eagle3",
    "mtp",
    "ngram",
    "draft_model",
    "suffix",
    "medusa",
    "mlp_speculator",
    "dflash",
    "dspark",
    "other",
)
_ALL += [
    FactKey(
        "deploy.speculative",
        _E,
        "speculative decoding: vLLM `--speculative-config` `method` (a per-model MTP method is"
        " `mtp`; no method and no draft `model` is `draft_model`; a draft `model` with no method,"
        " whose checkpoint decides, and a method vLLM does not name are `other`), SGLang"
        " `--speculative-algorithm` (`NEXTN` is `mtp`, `STANDALONE` is `draft_model`, a plugin's"
        " algorithm `other`); `none` when nothing states it. With it on, decode runs several query"
        " tokens per request (spec-as-decode)",
        SPECULATIVE_METHODS,
        "mtp",
    ),
    FactKey(
        "deploy.two_batch_overlap",
        Kind.BOOL,
        "SGLang `--enable-two-batch-overlap`: each batch is split in two micro-batches whose"
        " compute and all-to-all overlap, so a MoE layer may see a micro-batch of 0 tokens;"
        " false when nothing states it",
        (),
        "false",
    ),
    FactKey(
        "deploy.dcp",
        Kind.INT,
        "vLLM `--decode-context-parallel-size` (`-dcp`): ranks the decode KV cache is split over;"
        " 1 when nothing states it",
        (),
        "1",
    ),
    FactKey(
        "deploy.disaggregation",
        _E,
        "prefill/decode disaggregation role: SGLang `--disaggregation-mode` (`null` is `none`),"
        " vLLM `--kv-transfer-config` `kv_role` (`kv_producer` is `prefill`, `kv_consumer`"
        " `decode`, `kv_both` is `both`: a rule of either role names it too); `none` when nothing"
        " states it",
        ("none", "prefill", "decode", "both"),
        "prefill",
    ),
]
# --- end of serving modes -------------------------------------------------------------------

#: Every static key, by name. ``deploy.env.<NAME>`` keys are dynamic (see :func:`lookup_key`).
FACT_KEYS: Final[dict[str, FactKey]] = {k.name: k for k in _ALL}

ENV_PREFIX: Final = "deploy.env."
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def lookup_key(name: str) -> FactKey | None:
    """The vocabulary entry for *name*, or ``None`` when it is not a fact key.

    ``deploy.env.<NAME>`` is a key for every environment variable name: its value is the
    string the user set.
    """
    key = FACT_KEYS.get(name)
    if key is not None:
        return key
    if name.startswith(ENV_PREFIX) and _ENV_NAME.match(name[len(ENV_PREFIX) :]):
        return FactKey(name, Kind.STR, f"environment variable `{name[len(ENV_PREFIX) :]}`")
    return None


# deploy.allow_rules: added with the resolver's override semantics
FACT_KEYS["deploy.allow_rules"] = FactKey(
    "deploy.allow_rules",
    Kind.STR_LIST,
    "ids of crash rules (or catalog requirements) an explicit choice may override",
    (),
    "[deep_gemm-no-sm120-sf-layout]",
)
