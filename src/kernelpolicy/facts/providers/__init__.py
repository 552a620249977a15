"""Fact providers: small gatherers of what this machine really has, each with its cost.

Nothing here imports torch, triton, pynvml, deep_gemm or vllm at import time: NVML is imported
inside :class:`NvmlProvider`, and everything heavier runs in a child process.
"""

from __future__ import annotations

from ._base import COSTS, Context, Cost, Provider, ProviderResult, Runner, ScriptRun, Source
from ._deep_gemm import DeepGemmBuildProvider
from ._host import HostProvider
from ._nvcc import NvccProvider
from ._nvml import NvmlProvider
from ._packages import PackagesProvider
from ._probes import DeepGemmProbeProvider, TritonProbeProvider
from ._subprocess import run_script
from ._torch import TorchProvider

__all__ = [
    "COSTS",
    "Context",
    "Cost",
    "DeepGemmBuildProvider",
    "DeepGemmProbeProvider",
    "HostProvider",
    "NvccProvider",
    "NvmlProvider",
    "PackagesProvider",
    "Provider",
    "ProviderResult",
    "Runner",
    "ScriptRun",
    "Source",
    "TorchProvider",
    "TritonProbeProvider",
    "default_providers",
    "run_script",
]


def default_providers() -> tuple[Provider, ...]:
    """Every provider, in the order they run (later ones see earlier facts; later wins)."""
    return (
        HostProvider(),
        PackagesProvider(),
        NvccProvider(),
        DeepGemmBuildProvider(),
        NvmlProvider(),
        TorchProvider(),
        DeepGemmProbeProvider(),
        TritonProbeProvider(),
    )
