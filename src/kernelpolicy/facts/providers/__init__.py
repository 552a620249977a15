"""Fact providers: small gatherers of what this machine really has, each with its cost.

Nothing here imports torch, triton, pynvml, deep_gemm or vllm at import time: NVML is imported
inside :class:`NvmlProvider`, and everything heavier runs in a child process.
"""

from __future__ import annotations

from ._base import COSTS, Context, Cost, Provider, ProviderResult, Runner, ScriptRun, Source
from ._cache import cache_key, default_cache_dir, device_identity, read_cache, write_cache
from ._deep_gemm import DeepGemmBuildProvider, build_facts, find_builds, in_use
from ._host import HostProvider
from ._nvcc import NvccProvider
from ._nvml import NvmlProvider
from ._packages import PackagesProvider, installed
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
    "build_facts",
    "cache_key",
    "default_cache_dir",
    "default_providers",
    "device_identity",
    "find_builds",
    "in_use",
    "installed",
    "read_cache",
    "run_script",
    "write_cache",
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
