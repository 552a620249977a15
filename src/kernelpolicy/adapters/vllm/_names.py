"""How kernelpolicy's engine-neutral backend ids map to vLLM's names (data only, no vLLM import)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "DENSE_BLOCK_KERNELS",
    "DENSE_TENSOR_KERNELS",
    "MOE_BACKENDS",
    "MOE_CLI_NAMES",
    "ROUTER_FLAGS",
    "dense_id_of",
    "moe_id_of",
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
    "deep_gemm": "deep_gemm",
    "vllm_cutlass": "cutlass",
    "triton": "triton",
    "marlin": "marlin",
    "humming": "humming",
    "aiter": "aiter",
    "emulation": "emulation",
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
    for table in (DENSE_TENSOR_KERNELS, DENSE_BLOCK_KERNELS)
    for bid, classes in table.items()
    for cls in classes
}
_MOE_BY_MEMBER: Final = {m: bid for bid, members in MOE_BACKENDS.items() for m in members}


def dense_id_of(class_name: str | None) -> str | None:
    """The dense id of a vLLM kernel class name (``None`` when unknown)."""
    return _DENSE_BY_CLASS.get(class_name or "")


def moe_id_of(member: str | None) -> str | None:
    """The moe id of an ``Fp8MoeBackend`` member name (``None`` when unknown)."""
    return _MOE_BY_MEMBER.get(member or "")
