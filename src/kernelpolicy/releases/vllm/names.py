"""How kernelpolicy's engine-neutral backend ids map to vLLM's names (data only, no vLLM import)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "DENSE_BLOCK_KERNELS",
    "DENSE_LINEAR_KERNELS",
    "DENSE_MP_KERNELS",
    "DENSE_TENSOR_KERNELS",
    "MOE_BACKENDS",
    "MOE_CLI_NAMES",
    "MOE_ORACLE_BACKENDS",
    "MOE_ORACLE_NAMES",
    "ROUTER_FLAGS",
    "UNMODELLED_DENSE_KERNELS",
    "dense_id_of",
    "moe_id_of",
    "oracle_moe_id_of",
]

#: dense id -> vLLM kernel class names (block-scaled FP8 layers), in no particular order.
DENSE_BLOCK_KERNELS: Final[dict[str, tuple[str, ...]]] = {
    "flashinfer_deep_gemm": ("FlashInferFp8DeepGEMMDynamicBlockScaledKernel",),
    "deep_gemm": ("DeepGemmFp8BlockScaledMMKernel",),
    "cutlass": ("CutlassFp8BlockScaledMMKernel",),
    "b12x": ("B12xFp8BlockScaledMMKernel",),
    "marlin": ("MarlinFP8ScaledMMLinearKernel",),
    "humming": ("HummingFP8ScaledMMLinearKernel",),
    "triton": ("TritonFp8BlockScaledMMKernel",),
    "torch": ("BlockWiseTorchFP8ScaledMMLinearKernel",),
    "flashinfer_cutlass": ("FlashInferFp8BlockScaledMMKernel",),
}

#: dense id -> vLLM kernel class names (per-tensor / per-channel FP8 layers).
DENSE_TENSOR_KERNELS: Final[dict[str, tuple[str, ...]]] = {
    "flashinfer_cutlass": ("FlashInferFP8ScaledMMLinearKernel",),
    "cutlass": ("CutlassFP8ScaledMMLinearKernel",),
    "b12x": ("B12xTensorFP8ScaledMMLinearKernel",),
    "torch": ("PerTensorTorchFP8ScaledMMLinearKernel", "ChannelWiseTorchFP8ScaledMMLinearKernel"),
    "marlin": ("MarlinFP8ScaledMMLinearKernel",),
    "humming": ("HummingFP8ScaledMMLinearKernel",),
}

#: dense id -> vLLM kernel class names of the MXFP8, NVFP4 and MXFP4 linear tables. vLLM's
#: cuDNN and FBGEMM NVFP4 kernels have no kernelpolicy id (:data:`UNMODELLED_DENSE_KERNELS`).
DENSE_LINEAR_KERNELS: Final[dict[str, tuple[str, ...]]] = {
    "flashinfer_cutedsl": (
        "FlashInferCutedslMxfp8LinearKernel",
        "FlashInferCuteDslNvFp4LinearKernel",
        "FlashInferCuteDslNvFp4W4A16LinearKernel",
    ),
    "flashinfer_cutlass": (
        "FlashInferCutlassMxfp8LinearKernel",
        "FlashInferCutlassNvFp4LinearKernel",
        "FlashInferMxFp4LinearKernel",
    ),
    "flashinfer_trtllm": ("FlashInferTrtllmMxfp8LinearKernel", "FlashInferTrtllmNvFp4LinearKernel"),
    "cutlass": ("CutlassNvFp4LinearKernel",),
    "b12x": (
        "B12xMxfp8LinearKernel",
        "FlashInferB12xNvFp4LinearKernel",
        "B12xNvFp4LinearKernel",
        "B12xNvFp4W4A16LinearKernel",
        "B12xMxFp4LinearKernel",
    ),
    "marlin": ("MarlinMxfp8LinearKernel", "MarlinNvFp4LinearKernel", "MarlinMxFp4LinearKernel"),
    "humming": ("HummingMxfp8LinearKernel", "HummingNvFp4LinearKernel", "HummingMxFp4LinearKernel"),
    "torch": ("TorchMxFp8LinearKernel", "TorchNvFp4LinearKernel"),
    "emulation": ("EmulationMxfp8LinearKernel", "EmulationNvFp4LinearKernel", "EmulationMxfp4LinearKernel"),
}

#: dense id -> vLLM's weight-only (W4A16/W8A16) kernel classes, its ``choose_mp_linear_kernel``
#: table; Machete, CUTLASS W4A8, AllSpark, Conch, ExLlama and Triton W4A16 have no kernelpolicy id.
DENSE_MP_KERNELS: Final[dict[str, tuple[str, ...]]] = {
    "marlin": ("MarlinLinearKernel",),
    "humming": ("HummingLinearKernel",),
}

#: vLLM dense kernel classes no kernelpolicy backend stands for (left out of generated orders).
UNMODELLED_DENSE_KERNELS: Final[frozenset[str]] = frozenset(
    {"FlashInferCudnnNvFp4LinearKernel", "FbgemmNvFp4LinearKernel"}
)

#: moe id -> ``Fp8MoeBackend`` member names (the batched variant second, where one exists).
MOE_BACKENDS: Final[dict[str, tuple[str, ...]]] = {
    "flashinfer_trtllm": ("FLASHINFER_TRTLLM",),
    "flashinfer_cutlass": ("FLASHINFER_CUTLASS",),
    "deep_gemm": ("DEEPGEMM", "BATCHED_DEEPGEMM"),
    "vllm_cutlass": ("VLLM_CUTLASS", "BATCHED_VLLM_CUTLASS"),
    "triton": ("TRITON", "BATCHED_TRITON"),
    "marlin": ("MARLIN",),
    "humming": ("HUMMING",),
    "aiter": ("AITER",),
    "emulation": ("EMULATION",),
}

#: moe id -> the ``--moe-backend`` / ``KernelConfig.moe_backend`` value vLLM accepts.
MOE_CLI_NAMES: Final[dict[str, str]] = {
    "flashinfer_trtllm": "flashinfer_trtllm",
    "flashinfer_cutlass": "flashinfer_cutlass",
    "flashinfer_cutedsl": "flashinfer_cutedsl",
    "flashinfer_b12x": "flashinfer_b12x",
    "flashinfer_megamoe": "flashinfer_moe_ep_mega_deep_gemm",  # 0.32+: FlashInfer's MoE-EP layer, DeepGEMM megakernel
    "deep_gemm": "deep_gemm",
    "deep_gemm_mega_moe": "deep_gemm_mega_moe",  # the model's own MegaMoE layer, not an oracle backend
    "vllm_cutlass": "cutlass",
    "triton": "triton",
    "marlin": "marlin",
    "humming": "humming",
    "aiter": "aiter",
    "emulation": "emulation",
}

#: scheme -> moe id -> the ``moe_backend`` value that scheme's oracle (``oracle/<scheme>.py``)
#: maps to that backend. A release accepts a value only when it is in
#: :attr:`.versions.MoeOracle.names` (``b12x`` for MXFP4, for instance, from 0.29).
MOE_ORACLE_NAMES: Final[dict[str, dict[str, str]]] = {
    "mxfp4": {  # map_mxfp4_backend
        "deep_gemm": "deep_gemm",  # DEEPGEMM_MXFP4 (FP8xFP4 grouped GEMM)
        "flashinfer_trtllm": "flashinfer_trtllm",  # FLASHINFER_TRTLLM_MXFP4_{BF16,MXFP8}
        "flashinfer_cutlass": "flashinfer_cutlass",  # FLASHINFER_CUTLASS_MXFP4_{BF16,MXFP8}
        "triton": "triton",  # TRITON: OAI triton_kernels
        "marlin": "marlin",  # MARLIN (BATCHED_MARLIN under the batched format)
        "humming": "humming",
        "aiter": "aiter",
        "emulation": "emulation",
        "flashinfer_b12x": "b12x",  # B12X_MXFP4_{MXFP8,BF16}
    },
    "mxfp8": {  # _BACKEND_NAME_MAP (members of Fp8MoeBackend)
        "flashinfer_trtllm": "flashinfer_trtllm",
        "deep_gemm": "deep_gemm",
        "marlin": "marlin",
        "aiter": "aiter",  # AITER_MXFP8
        "triton": "triton",  # TRITON_MXFP8
        "humming": "humming",
    },
    "nvfp4": {  # map_nvfp4_backend
        "flashinfer_trtllm": "flashinfer_trtllm",
        "flashinfer_cutlass": "flashinfer_cutlass",
        "flashinfer_cutedsl": "flashinfer_cutedsl",
        "flashinfer_b12x": "flashinfer_b12x",  # FLASHINFER_B12X (never auto-selected)
        "vllm_cutlass": "cutlass",
        "marlin": "marlin",
        "humming": "humming",
        "emulation": "emulation",
    },
}

#: scheme -> moe id -> that scheme's backend enum members (to read back what the oracle chose).
MOE_ORACLE_BACKENDS: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    "mxfp4": {
        "deep_gemm": ("DEEPGEMM_MXFP4",),
        "flashinfer_trtllm": ("FLASHINFER_TRTLLM_MXFP4_BF16", "FLASHINFER_TRTLLM_MXFP4_MXFP8"),
        "flashinfer_cutlass": ("FLASHINFER_CUTLASS_MXFP4_BF16", "FLASHINFER_CUTLASS_MXFP4_MXFP8"),
        "vllm_cutlass": ("CUTLASS_MXFP4_MXFP4",),
        "triton": ("TRITON", "TRITON_UNFUSED"),
        "marlin": ("MARLIN", "BATCHED_MARLIN"),
        "humming": ("HUMMING",),
        "aiter": (
            "AITER_MXFP4_BF16",
            "AITER",
            "AITER_TRITON_MXFP4_BF16",
            "AITER_MXFP4_FP8",
            "AITER_MXFP4_MXFP4",
            "AITER_TRITON_MXFP4_MXFP4",
        ),
        "emulation": ("EMULATION",),
        "flashinfer_b12x": ("B12X_MXFP4_MXFP8", "B12X_MXFP4_BF16"),
    },
    "mxfp8": {
        "flashinfer_trtllm": ("FLASHINFER_TRTLLM",),
        "deep_gemm": ("DEEPGEMM", "BATCHED_DEEPGEMM"),
        "marlin": ("MARLIN",),
        "aiter": ("AITER_MXFP8", "AITER"),
        "triton": ("TRITON_MXFP8", "NATIVE_MXFP8"),
        "humming": ("HUMMING",),
        "emulation": ("EMULATION",),
    },
    "nvfp4": {
        "flashinfer_trtllm": ("FLASHINFER_TRTLLM",),
        "flashinfer_cutlass": ("FLASHINFER_CUTLASS",),
        "flashinfer_cutedsl": ("FLASHINFER_CUTEDSL", "FLASHINFER_CUTEDSL_BATCHED"),
        "flashinfer_b12x": ("FLASHINFER_B12X", "B12X"),
        "vllm_cutlass": ("VLLM_CUTLASS",),
        "marlin": ("MARLIN",),
        "humming": ("HUMMING",),
        "emulation": ("EMULATION",),
    },
}

#: ``GateLinear`` eligibility flag -> router id, in vLLM's dispatch order.
ROUTER_FLAGS: Final[dict[str, str]] = {
    "allow_ll_bf16_gemm": "ll_bf16",
    "allow_dsv3_router_gemm": "dsv3",
    "allow_fp32_router_gemm": "fp32_gemv",
    "allow_bf16x3_router_gemm": "bf16x3",
    "allow_cublas_router_gemm": "cublas",
}

_DENSE_BY_CLASS: Final = {
    cls: bid
    for table in (DENSE_TENSOR_KERNELS, DENSE_BLOCK_KERNELS, DENSE_LINEAR_KERNELS, DENSE_MP_KERNELS)
    for bid, classes in table.items()
    for cls in classes
}
_MOE_BY_MEMBER: Final = {m: bid for bid, members in MOE_BACKENDS.items() for m in members}
_ORACLE_BY_MEMBER: Final = {
    scheme: {m: bid for bid, members in table.items() for m in members} for scheme, table in MOE_ORACLE_BACKENDS.items()
}


def dense_id_of(class_name: str | None) -> str | None:
    """The dense id of a vLLM kernel class name (``None`` when unknown)."""
    return _DENSE_BY_CLASS.get(class_name or "")


def moe_id_of(member: str | None) -> str | None:
    """The moe id of an ``Fp8MoeBackend`` member name (``None`` when unknown)."""
    return _MOE_BY_MEMBER.get(member or "")


def oracle_moe_id_of(scheme: str, member: str | None) -> str | None:
    """The moe id of a member of the *scheme* oracle's backend enum (``None`` when unknown)."""
    return _ORACLE_BY_MEMBER.get(scheme, {}).get(member or "")
