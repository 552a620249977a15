"""Where vLLM keeps each selection point kernelpolicy reads and patches: one copy of each module
path, for the wheel scan (which reads the files) and the plugin's patch tables (which import the
modules)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEEP_GEMM_KERNEL_CLASS",
    "DENSE_MODULE",
    "DG_KERNEL_MODULE",
    "DG_UTILS_MODULE",
    "ENVS_MODULE",
    "GATE_LINEAR_MODULE",
    "KERNEL_WARMUP_MODULE",
    "MOE_ORACLE_MODULE",
    "WARMUP_MODULE",
    "source_file",
]

DENSE_MODULE: Final = "vllm.model_executor.kernels.linear"
DG_KERNEL_MODULE: Final = "vllm.model_executor.kernels.linear.scaled_mm.deep_gemm"
DEEP_GEMM_KERNEL_CLASS: Final = "DeepGemmFp8BlockScaledMMKernel"
MOE_ORACLE_MODULE: Final = "vllm.model_executor.layers.fused_moe.oracle.fp8"
DG_UTILS_MODULE: Final = "vllm.utils.deep_gemm"
WARMUP_MODULE: Final = "vllm.model_executor.warmup.deep_gemm_warmup"
KERNEL_WARMUP_MODULE: Final = "vllm.model_executor.warmup.kernel_warmup"
GATE_LINEAR_MODULE: Final = "vllm.model_executor.layers.fused_moe.router.gate_linear"
ENVS_MODULE: Final = "vllm.envs"


def source_file(module: str, *, package: bool = False) -> str:
    """The file of *module* inside the wheel (``vllm.envs``: ``vllm/envs.py``; a *package*: its
    ``__init__.py``)."""
    path = module.replace(".", "/")
    return f"{path}/__init__.py" if package else f"{path}.py"
