"""NVML provider: every way NVML can fail, GB10's unified memory, visible-device mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from machine_fakes import gb10_gpu, h200_gpu, load_record, script_nvml

from kernelpolicy.facts.providers import Context, NvmlProvider, _nvml

if TYPE_CHECKING:
    import pytest


def collect(env: dict[str, str] | None = None) -> Any:
    return NvmlProvider().collect(Context(env=env or {}))


def test_nvml_module_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Any:
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(_nvml, "import_pynvml", missing)
    res = collect()
    assert res.values == {}
    assert "nvidia-ml-py is not installed" in str(res.raw["gpu_absent"])


def test_library_not_found(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    nv = pynvml_mod
    script_nvml(monkeypatch, nv, [], init_error=nv.NVML_ERROR_LIBRARY_NOT_FOUND)
    res = collect()
    assert res.values == {}
    assert res.raw["gpu_absent"] == "NVML library not found (no NVIDIA driver installed)"
    assert res.notes == ["nvml: NVML library not found (no NVIDIA driver installed)"]


def test_driver_not_loaded(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    nv = pynvml_mod
    script_nvml(monkeypatch, nv, [], init_error=nv.NVML_ERROR_DRIVER_NOT_LOADED)
    res = collect()
    assert res.raw["gpu_absent"] == "the NVIDIA driver is not loaded"


def test_real_nvml_without_driver_does_not_raise(pynvml_mod: Any) -> None:
    # on a machine without a driver this is the real LibraryNotFound path; with one, real facts
    res = collect()
    assert "gpu_absent" in res.raw or "gpu.cc" in res.values


def test_h200_replayed(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    res = collect()
    want = load_record("machine.json")["probe"]["facts"]
    for key in res.values:
        assert res.values[key] == want[key], key
        assert res.sources[key] == "nvml"
    assert res.values["gpu.sm"] == "sm90"
    assert res.values["gpu.memory_mib"] == 143771
    assert res.values["gpu.arch"] == "hopper"


def test_gb10_memory_not_supported(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    script_nvml(monkeypatch, pynvml_mod, [gb10_gpu()])
    res = collect()
    assert res.values["gpu.sm"] == "sm121"
    assert res.values["gpu.family"] == "sm120"
    assert res.values["gpu.unified_memory"] is True
    assert res.values["gpu.has_tcgen05"] is False
    assert "gpu.memory_mib" not in res.values
    assert any("memory info not supported" in n for n in res.notes)


def test_visible_devices_mapped_to_physical(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu(), gb10_gpu()])
    res = collect({"CUDA_VISIBLE_DEVICES": "1"})
    assert res.values["gpu.name"] == "NVIDIA GB10"
    assert res.values["gpu.count"] == 1
    assert res.raw["device"]["index"] == 1


def test_mixed_gpus_noted(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu(), gb10_gpu()])
    res = collect()
    assert res.values["gpu.count"] == 2
    assert any("differ in capability" in n for n in res.notes)


def test_nothing_visible(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    res = collect({"CUDA_VISIBLE_DEVICES": ""})
    assert "gpu.cc" not in res.values
    assert res.values["driver.version"] == "580.159.04"
    assert res.raw["gpu_absent"] == "no GPU is visible (CUDA_VISIBLE_DEVICES=``)"


def test_zero_gpus(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any) -> None:
    script_nvml(monkeypatch, pynvml_mod, [])
    assert collect().raw["gpu_absent"] == "NVML found no NVIDIA GPU"
