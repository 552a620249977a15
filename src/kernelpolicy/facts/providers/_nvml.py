"""GPU facts from NVML: no CUDA context, no torch; the first CUDA-visible device."""

from __future__ import annotations

import contextlib
from typing import Any

from ._base import Context, Cost, ProviderResult
from ._gpu import arch_name, capability_facts, cuda_version_text, visible_physical_indices

__all__ = ["NvmlProvider", "import_pynvml"]


def import_pynvml() -> Any:
    """The ``pynvml`` module of nvidia-ml-py (imported here, never at package import)."""
    import pynvml

    return pynvml


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _reason(nv: Any, exc: BaseException) -> str:
    if isinstance(exc, nv.NVMLError_LibraryNotFound):
        return "NVML library not found (no NVIDIA driver installed)"
    if isinstance(exc, nv.NVMLError_DriverNotLoaded):
        return "the NVIDIA driver is not loaded"
    return f"NVML error: {exc}"


class NvmlProvider:
    name = "nvml"
    cost: Cost = "nvml"
    provides = (
        "gpu.sm",
        "gpu.family",
        "gpu.cc",
        "gpu.name",
        "gpu.count",
        "gpu.arch",
        "gpu.memory_mib",
        "gpu.unified_memory",
        "gpu.has_tcgen05",
        "driver.version",
        "driver.cuda_version",
    )

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        try:
            nv = import_pynvml()
        except ImportError:
            from ..._install import install_command

            res.raw["gpu_absent"] = f"nvidia-ml-py is not installed ({install_command('nvml')})"
            res.notes.append(f"nvml: {res.raw['gpu_absent']}")
            return res
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            res.raw["gpu_absent"] = _reason(nv, exc)
            res.notes.append(f"nvml: {res.raw['gpu_absent']}")
            return res
        try:
            self._collect(nv, ctx, res)
        except nv.NVMLError as exc:
            res.raw.setdefault("gpu_absent", _reason(nv, exc))
            res.notes.append(f"nvml: {_reason(nv, exc)}")
        finally:
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlShutdown()
        return res

    def _collect(self, nv: Any, ctx: Context, res: ProviderResult) -> None:
        res.put("driver.version", _text(nv.nvmlSystemGetDriverVersion()), "nvml")
        try:
            res.put(
                "driver.cuda_version",
                cuda_version_text(nv.nvmlSystemGetCudaDriverVersion()),
                "nvml",
            )
        except nv.NVMLError as exc:
            res.notes.append(f"nvml: no CUDA driver version ({exc})")
        count = int(nv.nvmlDeviceGetCount())
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        uuids = [_text(nv.nvmlDeviceGetUUID(h)) for h in handles]
        env_value = ctx.env.get("CUDA_VISIBLE_DEVICES")
        visible = visible_physical_indices(env_value, count, uuids)
        res.raw["physical_count"] = count
        res.raw["visible"] = visible
        if not visible:
            res.raw["gpu_absent"] = (
                "NVML found no NVIDIA GPU" if count == 0 else f"no GPU is visible (CUDA_VISIBLE_DEVICES=`{env_value}`)"
            )
            res.notes.append(f"nvml: {res.raw['gpu_absent']}")
            return
        res.put("gpu.count", len(visible), "nvml")
        devices = []
        for idx in visible:
            major, minor = nv.nvmlDeviceGetCudaComputeCapability(handles[idx])
            devices.append((idx, int(major), int(minor), _text(nv.nvmlDeviceGetName(handles[idx]))))
        idx, major, minor, name = devices[0]
        if len({(d[1], d[2]) for d in devices}) > 1:
            res.notes.append(
                f"nvml: visible GPUs differ in capability; facts describe the first (physical index {idx})"
            )
        for key, value in capability_facts(major, minor).items():
            res.put(key, value, "nvml")
        res.put("gpu.name", name, "nvml")
        res.raw["device"] = {"index": idx, "uuid": uuids[idx], "name": name, "cc": [major, minor]}
        handle = handles[idx]
        try:
            res.put("gpu.arch", arch_name(int(nv.nvmlDeviceGetArchitecture(handle))), "nvml")
        except nv.NVMLError as exc:
            res.notes.append(f"nvml: no architecture ({exc})")
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
        except nv.NVMLError_NotSupported:
            res.put("gpu.unified_memory", True, "nvml")
            res.notes.append("nvml: memory info not supported (unified memory, e.g. GB10)")
        except nv.NVMLError as exc:
            res.notes.append(f"nvml: no memory info ({exc})")
        else:
            res.put("gpu.memory_mib", int(mem.total) // (1024 * 1024), "nvml")
            res.put("gpu.unified_memory", False, "nvml")
