"""The vLLM selection points kernelpolicy patches, per release (0.24 ... 0.33), as typed data.

Every value was read from the release's wheel (``scripts/vllm-selection-scan.py`` over the
unzipped ``.py`` files; the scan output is kept in ``tests/adapters/data/`` and a test checks
this table against it). Releases are keyed by ``major.minor``; the scanned patch release is in
:attr:`VllmPatchPoints.scanned`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Literal

from packaging.version import InvalidVersion, Version

__all__ = [
    "DEEP_GEMM_KERNEL_CLASS",
    "DENSE_MODULE",
    "DG_KERNEL_MODULE",
    "DG_UTILS_MODULE",
    "GATE_LINEAR_MODULE",
    "KERNEL_WARMUP_MODULE",
    "MOE_ORACLE_MODULE",
    "SUPPORTED",
    "WARMUP_MODULE",
    "MoeOracle",
    "VllmPatchPoints",
    "patch_points_for",
]

DENSE_MODULE: Final = "vllm.model_executor.kernels.linear"
DG_KERNEL_MODULE: Final = "vllm.model_executor.kernels.linear.scaled_mm.deep_gemm"
DEEP_GEMM_KERNEL_CLASS: Final = "DeepGemmFp8BlockScaledMMKernel"
MOE_ORACLE_MODULE: Final = "vllm.model_executor.layers.fused_moe.oracle.fp8"
DG_UTILS_MODULE: Final = "vllm.utils.deep_gemm"
WARMUP_MODULE: Final = "vllm.model_executor.warmup.deep_gemm_warmup"
KERNEL_WARMUP_MODULE: Final = "vllm.model_executor.warmup.kernel_warmup"
GATE_LINEAR_MODULE: Final = "vllm.model_executor.layers.fused_moe.router.gate_linear"

_Q: Final = "vllm.model_executor.layers.quantization."
_ORACLES: Final = "vllm.model_executor.layers.fused_moe.oracle."
#: By-name importers of ``select_fp8_moe_backend`` (identical in every release 0.24-0.33).
_MOE_IMPORTERS: Final = (
    _Q + "compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w8a8_fp8",
    _Q + "fp8",
    _Q + "modelopt",
    _Q + "online.fp8",
    _Q + "quark.quark_moe",
)


@dataclass(frozen=True)
class MoeOracle:
    """The MoE oracle of one expert quantization scheme (``oracle/{mxfp4,mxfp8,nvfp4}.py``).

    Every ``select_*`` function here reads ``FusedMoEConfig.moe_backend`` first: any value
    other than ``"auto"`` is looked up in the oracle's own name map (:attr:`names`) and that
    backend is returned or refused (``ValueError``); ``"auto"`` walks vLLM's priority list.
    """

    scheme: Literal["mxfp4", "mxfp8", "nvfp4"]
    #: the ``select_*`` functions (all take the ``FusedMoEConfig`` first)
    functions: tuple[str, ...]
    #: the backend enum (``Fp8MoeBackend`` for MXFP8, shared with the FP8 oracle)
    enum: str
    #: the enum's members
    backends: tuple[str, ...]
    #: the ``moe_backend`` values the oracle's name map accepts (sorted)
    names: tuple[str, ...]
    #: modules holding a module-level by-name copy of a ``select_*`` function
    importers: tuple[str, ...]

    @property
    def module(self) -> str:
        return _ORACLES + self.scheme


@dataclass(frozen=True)
class VllmPatchPoints:
    """Where one vLLM release decides each FP8 path, and what an adapter must patch there."""

    release: str  #: ``major.minor``
    scanned: str  #: the exact release the data was read from
    #: ``_POSSIBLE_FP8_BLOCK_KERNELS[PlatformEnum.CUDA]`` in vLLM's priority order
    block_kernels: tuple[str, ...]
    #: ``_POSSIBLE_FP8_KERNELS[PlatformEnum.CUDA]`` (per-tensor/channel FP8)
    tensor_kernels: tuple[str, ...]
    #: ``choose_scaled_mm_linear_kernel`` takes the keyword-only ``quantization``
    choose_takes_quantization: bool
    #: the FP8 MoE oracle removes DeepGEMM itself for auto-disabled model types (env unset,
    #: ``moe_backend="auto"`` only)
    moe_oracle_checks_model_type: bool
    #: ``Fp8MoeBackend`` members
    moe_backends: tuple[str, ...]
    #: modules holding a by-name copy of ``should_auto_disable_deep_gemm`` (besides its own)
    auto_disable_importers: tuple[str, ...]
    #: ``_DEEPGEMM_BLACKWELL_EXCLUDED_MODEL_TYPES`` is a set (all of 100/120) or a per-type dict
    excluded_model_types: Literal["set", "dict"]
    #: the dense DeepGEMM warmup selector in ``deep_gemm_warmup``
    dense_warmup_gate: Literal["_fp8_linear_may_use_deep_gemm", "_deep_gemm_linear_data"]
    #: MoE DeepGEMM warmup selectors in ``deep_gemm_warmup``
    moe_warmup_gates: tuple[str, ...]
    #: ``GateLinear`` attributes named ``allow_*`` set in ``__init__``
    router_flags: tuple[str, ...]
    #: ``GateLinear.FP32_SUPPORTED_SHAPES`` ((hidden, experts) with an FP32 GEMV instance)
    fp32_supported_shapes: frozenset[tuple[int, int]]
    #: BF16x3 router needs ``KernelConfig.enable_bf16x3_router_gemm``
    bf16x3_opt_in: bool
    #: the cuBLAS router tier has its own gate (covers family 120)
    router_cublas_gate: bool
    #: ``vllm.third_party.deep_gemm.__version__``
    vendored_deep_gemm: str
    #: the vendored DeepGEMM ships ``impls/sm120_fp8_fp4_gemm_1d1d.cuh`` (SM120 FP8 GEMM)
    vendored_deep_gemm_sm120_marker: bool
    #: the MoE oracles of the non-FP8 expert schemes
    mxfp4_oracle: MoeOracle
    mxfp8_oracle: MoeOracle
    nvfp4_oracle: MoeOracle
    moe_select_importers: tuple[str, ...] = _MOE_IMPORTERS
    #: by-name importers of ``init_fp8_linear_kernel`` (it reads the kernel tables as globals
    #: of the dense module, so patching the tables reaches them all)
    dense_module: str = DENSE_MODULE
    moe_oracle_module: str = MOE_ORACLE_MODULE
    warmup_module: str = WARMUP_MODULE
    gate_linear_module: str = GATE_LINEAR_MODULE

    def __post_init__(self) -> None:
        # the MXFP8 oracle's enum is Fp8MoeBackend: its members are always ``moe_backends``
        if self.mxfp8_oracle.backends != self.moe_backends:
            object.__setattr__(self, "mxfp8_oracle", replace(self.mxfp8_oracle, backends=self.moe_backends))

    @property
    def moe_oracles(self) -> tuple[MoeOracle, ...]:
        return (self.mxfp4_oracle, self.mxfp8_oracle, self.nvfp4_oracle)


# Each release is written as its changes to the one before: what moved between releases is
# what the diff shows.
_V024: Final = VllmPatchPoints(
    release="0.24",
    scanned="0.24.0",
    block_kernels=(
        "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
        "DeepGemmFp8BlockScaledMMKernel",
        "CutlassFp8BlockScaledMMKernel",
        "MarlinFP8ScaledMMLinearKernel",
        "TritonFp8BlockScaledMMKernel",
    ),
    tensor_kernels=(
        "MarlinFP8ScaledMMLinearKernel",
        "FlashInferFP8ScaledMMLinearKernel",
        "CutlassFP8ScaledMMLinearKernel",
        "PerTensorTorchFP8ScaledMMLinearKernel",
        "ChannelWiseTorchFP8ScaledMMLinearKernel",
    ),
    choose_takes_quantization=False,
    moe_oracle_checks_model_type=False,
    moe_backends=(
        "NONE",
        "FLASHINFER_TRTLLM",
        "FLASHINFER_CUTLASS",
        "DEEPGEMM",
        "BATCHED_DEEPGEMM",
        "MARLIN",
        "TRITON",
        "BATCHED_TRITON",
        "AITER",
        "VLLM_CUTLASS",
        "BATCHED_VLLM_CUTLASS",
        "XPU",
        "CPU",
        "EMULATION",
        "NATIVE_MXFP8",
    ),
    auto_disable_importers=("vllm.model_executor.kernels.linear.scaled_mm.deep_gemm",),
    excluded_model_types="set",
    dense_warmup_gate="_fp8_linear_may_use_deep_gemm",
    moe_warmup_gates=("_fused_moe_grouped_gemm_may_use_deep_gemm",),
    router_flags=(
        "allow_cublas_router_gemm",
        "allow_dsv3_router_gemm",
        "allow_fp32_router_gemm",
        "allow_specialized_router_gemm",
    ),
    fp32_supported_shapes=frozenset({(3072, 256), (6144, 128)}),
    bf16x3_opt_in=False,
    router_cublas_gate=False,
    vendored_deep_gemm="2.5.0",
    vendored_deep_gemm_sm120_marker=False,
    mxfp4_oracle=MoeOracle(
        scheme="mxfp4",
        functions=("select_deepseek_v4_mxfp4_moe_backend", "select_mxfp4_moe_backend"),
        enum="Mxfp4MoeBackend",
        backends=(
            "NONE",
            "DEEPGEMM_MXFP4",
            "FLASHINFER_TRTLLM_MXFP4_MXFP8",
            "FLASHINFER_TRTLLM_MXFP4_BF16",
            "FLASHINFER_CUTLASS_MXFP4_MXFP8",
            "FLASHINFER_CUTLASS_MXFP4_BF16",
            "BATCHED_MARLIN",
            "MARLIN",
            "AITER_MXFP4_BF16",
            "AITER",
            "AITER_MXFP4_FP8",
            "AITER_MXFP4_MXFP4",
            "TRITON",
            "TRITON_UNFUSED",
            "XPU",
            "CPU",
            "EMULATION",
            "HUMMING",
        ),
        names=(
            "aiter",
            "aiter_mxfp4_fp8",
            "aiter_mxfp4_mxfp4",
            "cpu",
            "deep_gemm",
            "emulation",
            "flashinfer_cutlass",
            "flashinfer_cutlass_afp8",
            "flashinfer_trtllm",
            "flashinfer_trtllm_afp8",
            "humming",
            "marlin",
            "triton",
            "triton_unfused",
            "xpu",
        ),
        importers=(
            "vllm.model_executor.layers.quantization.mxfp4",
            "vllm.model_executor.layers.quantization.quark.quark_moe",
        ),
    ),
    mxfp8_oracle=MoeOracle(
        scheme="mxfp8",
        functions=("select_mxfp8_moe_backend",),
        enum="Fp8MoeBackend",
        backends=(),  # = moe_backends: the MXFP8 oracle uses Fp8MoeBackend
        names=(
            "deep_gemm",
            "flashinfer_trtllm",
            "marlin",
            "xpu",
        ),
        importers=(
            "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w8a8_mxfp8",
            "vllm.model_executor.layers.quantization.modelopt",
            "vllm.model_executor.layers.quantization.online.mxfp8",
        ),
    ),
    nvfp4_oracle=MoeOracle(
        scheme="nvfp4",
        functions=("select_nvfp4_moe_backend",),
        enum="NvFp4MoeBackend",
        backends=(
            "FLASHINFER_TRTLLM",
            "FLASHINFER_CUTLASS",
            "FLASHINFER_CUTEDSL",
            "FLASHINFER_CUTEDSL_BATCHED",
            "FLASHINFER_B12X",
            "VLLM_CUTLASS",
            "MARLIN",
            "EMULATION",
        ),
        names=(
            "cutlass",
            "emulation",
            "flashinfer_b12x",
            "flashinfer_cutedsl",
            "flashinfer_cutlass",
            "flashinfer_trtllm",
            "marlin",
        ),
        importers=(
            "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w4a4_nvfp4",
            "vllm.model_executor.layers.quantization.modelopt",
            "vllm.model_executor.layers.quantization.quark.quark_moe",
        ),
    ),
)

_V025: Final = replace(
    _V024,
    release="0.25",
    scanned="0.25.0",
    block_kernels=(
        "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
        "DeepGemmFp8BlockScaledMMKernel",
        "CutlassFp8BlockScaledMMKernel",
        "MarlinFP8ScaledMMLinearKernel",
        "TritonFp8BlockScaledMMKernel",
        "HummingFP8ScaledMMLinearKernel",
    ),
    tensor_kernels=(
        "MarlinFP8ScaledMMLinearKernel",
        "FlashInferFP8ScaledMMLinearKernel",
        "CutlassFP8ScaledMMLinearKernel",
        "PerTensorTorchFP8ScaledMMLinearKernel",
        "ChannelWiseTorchFP8ScaledMMLinearKernel",
        "HummingFP8ScaledMMLinearKernel",
    ),
    moe_backends=(
        "NONE",
        "FLASHINFER_TRTLLM",
        "FLASHINFER_CUTLASS",
        "DEEPGEMM",
        "BATCHED_DEEPGEMM",
        "MARLIN",
        "HUMMING",
        "TRITON",
        "BATCHED_TRITON",
        "AITER",
        "VLLM_CUTLASS",
        "BATCHED_VLLM_CUTLASS",
        "XPU",
        "CPU",
        "HPC",
        "EMULATION",
        "TRITON_MXFP8",
        "AITER_MXFP8",
    ),
    vendored_deep_gemm_sm120_marker=True,
    mxfp8_oracle=replace(
        _V024.mxfp8_oracle,
        names=(
            "aiter",
            "deep_gemm",
            "flashinfer_trtllm",
            "humming",
            "marlin",
            "triton",
            "xpu",
        ),
    ),
    nvfp4_oracle=replace(
        _V024.nvfp4_oracle,
        backends=(
            "FLASHINFER_TRTLLM",
            "FLASHINFER_CUTLASS",
            "FLASHINFER_CUTEDSL",
            "FLASHINFER_CUTEDSL_BATCHED",
            "FLASHINFER_B12X",
            "VLLM_CUTLASS",
            "MARLIN",
            "HUMMING",
            "EMULATION",
        ),
        names=(
            "cutlass",
            "emulation",
            "flashinfer_b12x",
            "flashinfer_cutedsl",
            "flashinfer_cutlass",
            "flashinfer_trtllm",
            "humming",
            "marlin",
        ),
    ),
)

_V026: Final = replace(
    _V025,
    release="0.26",
    scanned="0.26.0",
    router_flags=(
        "allow_bf16x3_router_gemm",
        "allow_cublas_router_gemm",
        "allow_dsv3_router_gemm",
        "allow_fp32_router_gemm",
        "allow_ll_bf16_gemm",
        "allow_specialized_router_gemm",
    ),
    fp32_supported_shapes=frozenset({(3072, 256), (6144, 128), (6144, 256)}),
    bf16x3_opt_in=True,
    nvfp4_oracle=replace(
        _V025.nvfp4_oracle,
        importers=(
            "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w4a4_nvfp4",
            "vllm.model_executor.layers.quantization.modelopt",
            "vllm.model_executor.layers.quantization.online.nvfp4",
            "vllm.model_executor.layers.quantization.quark.quark_moe",
        ),
    ),
)

_V027: Final = replace(
    _V026,
    release="0.27",
    scanned="0.27.1",
    vendored_deep_gemm="2.6.1",
    vendored_deep_gemm_sm120_marker=False,
    mxfp4_oracle=replace(
        _V026.mxfp4_oracle,
        importers=(
            "vllm.model_executor.layers.quantization.inc.schemes.inc_mxfp4_moe",
            "vllm.model_executor.layers.quantization.mxfp4",
            "vllm.model_executor.layers.quantization.quark.quark_moe",
        ),
    ),
)

_V028: Final = replace(
    _V027,
    release="0.28",
    scanned="0.28.0",
    block_kernels=(
        "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
        "DeepGemmFp8BlockScaledMMKernel",
        "CutlassFp8BlockScaledMMKernel",
        "B12xFp8BlockScaledMMKernel",
        "MarlinFP8ScaledMMLinearKernel",
        "TritonFp8BlockScaledMMKernel",
        "HummingFP8ScaledMMLinearKernel",
        "BlockWiseTorchFP8ScaledMMLinearKernel",
    ),
    tensor_kernels=(
        "MarlinFP8ScaledMMLinearKernel",
        "FlashInferFP8ScaledMMLinearKernel",
        "CutlassFP8ScaledMMLinearKernel",
        "B12xTensorFP8ScaledMMLinearKernel",
        "PerTensorTorchFP8ScaledMMLinearKernel",
        "ChannelWiseTorchFP8ScaledMMLinearKernel",
        "HummingFP8ScaledMMLinearKernel",
    ),
    vendored_deep_gemm_sm120_marker=True,
    mxfp4_oracle=replace(
        _V027.mxfp4_oracle,
        importers=(
            "vllm.model_executor.layers.quantization.inc.schemes.inc_mxfp4_moe",
            "vllm.model_executor.layers.quantization.mxfp4",
            "vllm.model_executor.layers.quantization.online.mxfp4",
            "vllm.model_executor.layers.quantization.quark.quark_moe",
        ),
    ),
)

_V029: Final = replace(
    _V028,
    release="0.29",
    scanned="0.29.0",
    block_kernels=(
        "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
        "DeepGemmFp8BlockScaledMMKernel",
        "CutlassFp8BlockScaledMMKernel",
        "B12xFp8BlockScaledMMKernel",
        "MarlinFP8ScaledMMLinearKernel",
        "HummingFP8ScaledMMLinearKernel",
        "TritonFp8BlockScaledMMKernel",
        "BlockWiseTorchFP8ScaledMMLinearKernel",
    ),
    tensor_kernels=(
        "FlashInferFP8ScaledMMLinearKernel",
        "CutlassFP8ScaledMMLinearKernel",
        "B12xTensorFP8ScaledMMLinearKernel",
        "PerTensorTorchFP8ScaledMMLinearKernel",
        "ChannelWiseTorchFP8ScaledMMLinearKernel",
        "MarlinFP8ScaledMMLinearKernel",
        "HummingFP8ScaledMMLinearKernel",
    ),
    router_flags=(
        "allow_bf16x3_router_gemm",
        "allow_cublas_router_gemm",
        "allow_fp32_router_gemm",
        "allow_ll_bf16_gemm",
        "allow_specialized_router_gemm",
    ),
    fp32_supported_shapes=frozenset({(3072, 256), (6144, 128)}),
    router_cublas_gate=True,
    mxfp4_oracle=replace(
        _V028.mxfp4_oracle,
        backends=(
            "NONE",
            "B12X_MXFP4_MXFP8",
            "B12X_MXFP4_BF16",
            "DEEPGEMM_MXFP4",
            "FLASHINFER_TRTLLM_MXFP4_MXFP8",
            "FLASHINFER_TRTLLM_MXFP4_BF16",
            "FLASHINFER_CUTLASS_MXFP4_MXFP8",
            "FLASHINFER_CUTLASS_MXFP4_BF16",
            "BATCHED_MARLIN",
            "MARLIN",
            "AITER_MXFP4_BF16",
            "AITER",
            "AITER_MXFP4_FP8",
            "AITER_MXFP4_MXFP4",
            "TRITON",
            "TRITON_UNFUSED",
            "XPU",
            "CPU",
            "EMULATION",
            "HUMMING",
        ),
        names=(
            "aiter",
            "aiter_mxfp4_fp8",
            "aiter_mxfp4_mxfp4",
            "b12x",
            "cpu",
            "deep_gemm",
            "emulation",
            "flashinfer_cutlass",
            "flashinfer_cutlass_afp8",
            "flashinfer_trtllm",
            "flashinfer_trtllm_afp8",
            "humming",
            "marlin",
            "triton",
            "triton_unfused",
            "xpu",
        ),
        importers=(
            "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w4a4_mxfp4",
            "vllm.model_executor.layers.quantization.inc.schemes.inc_mxfp4_moe",
            "vllm.model_executor.layers.quantization.mxfp4",
            "vllm.model_executor.layers.quantization.online.mxfp4",
            "vllm.model_executor.layers.quantization.quark.quark_moe",
        ),
    ),
    mxfp8_oracle=replace(
        _V028.mxfp8_oracle,
        importers=(
            "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w8a8_mxfp8",
            "vllm.model_executor.layers.quantization.inc.schemes.inc_mxfp8_moe",
            "vllm.model_executor.layers.quantization.modelopt",
            "vllm.model_executor.layers.quantization.online.mxfp8",
        ),
    ),
    nvfp4_oracle=replace(
        _V028.nvfp4_oracle,
        backends=(
            "B12X",
            "FLASHINFER_TRTLLM",
            "FLASHINFER_CUTLASS",
            "FLASHINFER_CUTEDSL",
            "FLASHINFER_CUTEDSL_BATCHED",
            "FLASHINFER_B12X",
            "VLLM_CUTLASS",
            "MARLIN",
            "HUMMING",
            "EMULATION",
        ),
        names=(
            "b12x",
            "cutlass",
            "emulation",
            "flashinfer_b12x",
            "flashinfer_cutedsl",
            "flashinfer_cutlass",
            "flashinfer_trtllm",
            "humming",
            "marlin",
        ),
    ),
)

_V030: Final = replace(
    _V029,
    release="0.30",
    scanned="0.30.0",
    choose_takes_quantization=True,
    dense_warmup_gate="_deep_gemm_linear_data",
    bf16x3_opt_in=False,
    vendored_deep_gemm="2.8.0",
    mxfp4_oracle=replace(
        _V029.mxfp4_oracle,
        backends=(
            "NONE",
            "B12X_MXFP4_MXFP8",
            "B12X_MXFP4_BF16",
            "DEEPGEMM_MXFP4",
            "FLASHINFER_TRTLLM_MXFP4_MXFP8",
            "FLASHINFER_TRTLLM_MXFP4_BF16",
            "FLASHINFER_CUTLASS_MXFP4_MXFP8",
            "FLASHINFER_CUTLASS_MXFP4_BF16",
            "BATCHED_MARLIN",
            "MARLIN",
            "AITER_MXFP4_BF16",
            "AITER",
            "AITER_TRITON_MXFP4_BF16",
            "AITER_MXFP4_FP8",
            "AITER_MXFP4_MXFP4",
            "TRITON",
            "TRITON_UNFUSED",
            "XPU",
            "CPU",
            "EMULATION",
            "HUMMING",
        ),
        names=(
            "aiter",
            "aiter_mxfp4_fp8",
            "aiter_mxfp4_mxfp4",
            "aiter_triton_mxfp4_bf16",
            "b12x",
            "cpu",
            "deep_gemm",
            "emulation",
            "flashinfer_cutlass",
            "flashinfer_cutlass_afp8",
            "flashinfer_trtllm",
            "flashinfer_trtllm_afp8",
            "humming",
            "marlin",
            "triton",
            "triton_unfused",
            "xpu",
        ),
    ),
)

_V031: Final = replace(
    _V030,
    release="0.31",
    scanned="0.31.0",
    moe_backends=(
        "NONE",
        "FLASHINFER_TRTLLM",
        "FLASHINFER_CUTLASS",
        "DEEPGEMM",
        "BATCHED_DEEPGEMM",
        "MARLIN",
        "HUMMING",
        "TRITON",
        "BATCHED_TRITON",
        "AITER",
        "VLLM_CUTLASS",
        "BATCHED_VLLM_CUTLASS",
        "XPU",
        "CPU",
        "CPU_W8A8",
        "HPC",
        "EMULATION",
        "TRITON_MXFP8",
        "AITER_MXFP8",
    ),
)

_V032: Final = replace(
    _V031,
    release="0.32",
    scanned="0.32.0",
    router_flags=(
        "allow_bf16x3_router_gemm",
        "allow_cublas_router_gemm",
        "allow_fp32_router_gemm",
        "allow_ll_bf16_gemm",
        "allow_rocm_bf16x3_router_gemm",
        "allow_specialized_router_gemm",
    ),
    mxfp4_oracle=replace(
        _V031.mxfp4_oracle,
        backends=(
            "NONE",
            "B12X_MXFP4_MXFP8",
            "B12X_MXFP4_BF16",
            "DEEPGEMM_MXFP4",
            "FLASHINFER_TRTLLM_MXFP4_MXFP8",
            "FLASHINFER_TRTLLM_MXFP4_BF16",
            "FLASHINFER_CUTLASS_MXFP4_MXFP8",
            "FLASHINFER_CUTLASS_MXFP4_BF16",
            "CUTLASS_MXFP4_MXFP4",
            "BATCHED_MARLIN",
            "MARLIN",
            "AITER_MXFP4_BF16",
            "AITER",
            "AITER_TRITON_MXFP4_BF16",
            "AITER_MXFP4_FP8",
            "AITER_MXFP4_MXFP4",
            "TRITON",
            "TRITON_UNFUSED",
            "XPU",
            "CPU",
            "EMULATION",
            "HUMMING",
            "FLASHINFER_MOE_EP_CUTEDSL",
            "FLASHINFER_MOE_EP_DEEP_GEMM",
        ),
        names=(
            "aiter",
            "aiter_mxfp4_fp8",
            "aiter_mxfp4_mxfp4",
            "aiter_triton_mxfp4_bf16",
            "b12x",
            "cpu",
            "deep_gemm",
            "emulation",
            "flashinfer_cutlass",
            "flashinfer_cutlass_afp8",
            "flashinfer_moe_ep_cutedsl",
            "flashinfer_moe_ep_mega_deep_gemm",
            "flashinfer_trtllm",
            "flashinfer_trtllm_afp8",
            "humming",
            "marlin",
            "triton",
            "triton_unfused",
            "xpu",
        ),
    ),
    nvfp4_oracle=replace(
        _V031.nvfp4_oracle,
        backends=(
            "B12X",
            "FLASHINFER_TRTLLM",
            "FLASHINFER_CUTLASS",
            "FLASHINFER_CUTEDSL",
            "FLASHINFER_CUTEDSL_BATCHED",
            "FLASHINFER_B12X",
            "VLLM_CUTLASS",
            "MARLIN",
            "HUMMING",
            "EMULATION",
            "FLASHINFER_MOE_EP_CUTEDSL",
        ),
        names=(
            "b12x",
            "cutlass",
            "emulation",
            "flashinfer_b12x",
            "flashinfer_cutedsl",
            "flashinfer_cutlass",
            "flashinfer_moe_ep_cutedsl",
            "flashinfer_trtllm",
            "humming",
            "marlin",
        ),
    ),
)

_V033: Final = replace(
    _V032,
    release="0.33",
    scanned="0.33.0",
    moe_oracle_checks_model_type=True,
    auto_disable_importers=(
        "vllm.model_executor.kernels.linear.scaled_mm.deep_gemm",
        "vllm.model_executor.layers.fused_moe.oracle.fp8",
    ),
    excluded_model_types="dict",
    moe_warmup_gates=("_fused_moe_grouped_gemm_may_use_deep_gemm", "_mega_moe_may_use_deep_gemm"),
    router_flags=(
        "allow_bf16x3_router_gemm",
        "allow_cublas_router_gemm",
        "allow_fp32_router_gemm",
        "allow_ll_bf16_gemm",
        "allow_ll_fp32w_gemm",
        "allow_rocm_bf16x3_router_gemm",
        "allow_specialized_router_gemm",
    ),
    fp32_supported_shapes=frozenset({(3072, 256), (4096, 352), (5120, 256), (6144, 128), (8192, 256)}),
    vendored_deep_gemm="2.8.1",
    mxfp4_oracle=replace(
        _V032.mxfp4_oracle,
        backends=(
            "NONE",
            "B12X_MXFP4_MXFP8",
            "B12X_MXFP4_BF16",
            "DEEPGEMM_MXFP4",
            "FLASHINFER_TRTLLM_MXFP4_MXFP8",
            "FLASHINFER_TRTLLM_MXFP4_BF16",
            "FLASHINFER_CUTLASS_MXFP4_MXFP8",
            "FLASHINFER_CUTLASS_MXFP4_BF16",
            "CUTLASS_MXFP4_MXFP4",
            "BATCHED_MARLIN",
            "MARLIN",
            "AITER_MXFP4_BF16",
            "AITER",
            "AITER_TRITON_MXFP4_BF16",
            "AITER_MXFP4_FP8",
            "AITER_MXFP4_MXFP4",
            "AITER_TRITON_MXFP4_MXFP4",
            "TRITON",
            "TRITON_UNFUSED",
            "XPU",
            "CPU",
            "EMULATION",
            "HUMMING",
            "FLASHINFER_MOE_EP_CUTEDSL",
            "FLASHINFER_MOE_EP_DEEP_GEMM",
        ),
        names=(
            "aiter",
            "aiter_mxfp4_fp8",
            "aiter_mxfp4_mxfp4",
            "aiter_triton_mxfp4_bf16",
            "aiter_triton_mxfp4_mxfp4",
            "b12x",
            "cpu",
            "deep_gemm",
            "emulation",
            "flashinfer_cutlass",
            "flashinfer_cutlass_afp8",
            "flashinfer_moe_ep_cutedsl",
            "flashinfer_moe_ep_mega_deep_gemm",
            "flashinfer_trtllm",
            "flashinfer_trtllm_afp8",
            "humming",
            "marlin",
            "triton",
            "triton_unfused",
            "xpu",
        ),
    ),
    mxfp8_oracle=replace(
        _V032.mxfp8_oracle,
        importers=(
            "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w8a8_mxfp8",
            "vllm.model_executor.layers.quantization.inc.schemes.inc_mxfp8_moe",
            "vllm.model_executor.layers.quantization.modelopt",
            "vllm.model_executor.layers.quantization.online.mxfp8",
            "vllm.model_executor.layers.quantization.quark.quark_moe",
        ),
    ),
)

_TABLE: Final[tuple[VllmPatchPoints, ...]] = (_V024, _V025, _V026, _V027, _V028, _V029, _V030, _V031, _V032, _V033)

#: Releases the adapter knows, by ``major.minor``.
SUPPORTED: Final[dict[str, VllmPatchPoints]] = {p.release: p for p in _TABLE}


def patch_points_for(version: str) -> VllmPatchPoints | None:
    """The patch points of the vLLM release *version* (any patch level), or ``None``."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return SUPPORTED.get(f"{v.major}.{v.minor}")
