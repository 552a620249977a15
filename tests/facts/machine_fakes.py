"""Helpers for the machine-facts tests: a scripted NVML, replayed probe runs, isolation.

Everything here runs without a GPU or driver: NVML calls are monkeypatched on the real
nvidia-ml-py module (so its real error classes are raised), and probe children are replaced
by the outputs recorded on an H200 (docs/probes/2026-12-02-h200).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from kernelpolicy.facts.providers import ScriptRun, _deep_gemm, _nvml, _probes, _torch
from kernelpolicy.facts.providers._deep_gemm import DeepGemmBuild

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

RECORDS = Path(__file__).resolve().parents[2] / "docs" / "probes" / "2026-12-02-h200"


def load_record(name: str) -> Any:
    return json.loads((RECORDS / name).read_text())


@pytest.fixture
def h200_runs() -> dict[str, Any]:
    return dict(load_record("script-runs.json"))


def as_run(rec: Mapping[str, Any]) -> ScriptRun:
    return ScriptRun(rec["returncode"], rec["stdout"], rec["stderr"], bool(rec["timed_out"]), rec["seconds"])


class ReplayRunner:
    """A runner that answers each probe script with a recorded (or made-up) run."""

    def __init__(self, by_script: Mapping[str, ScriptRun | Callable[[Sequence[str]], ScriptRun]]):
        self.by_script = dict(by_script)
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> ScriptRun:
        self.calls.append(list(argv))
        answer = self.by_script[Path(argv[1]).name]
        return answer(argv) if callable(answer) else answer


@pytest.fixture
def replay_h200(h200_runs: dict[str, Any]) -> ReplayRunner:
    return ReplayRunner(
        {
            "deep_gemm_sf.py": as_run(h200_runs["deep_gemm_sf"]),
            "torch_info.py": lambda argv: as_run(
                h200_runs["torch_info_capability" if "--capability" in argv else "torch_info"]
            ),
            "triton_compile.py": as_run(h200_runs["triton_compile"]),
        }
    )


@pytest.fixture
def pynvml_mod() -> Any:
    return pytest.importorskip("pynvml")


class FakeGpu(SimpleNamespace):
    name: str
    cc: tuple[int, int]
    uuid: str
    arch: int
    memory: int | None  # None: NVMLError_NotSupported (unified memory)


def script_nvml(
    monkeypatch: pytest.MonkeyPatch,
    nv: Any,
    gpus: Sequence[FakeGpu],
    *,
    driver: str = "580.159.04",
    cuda: int = 13000,
    init_error: int | None = None,
) -> None:
    """Make the real pynvml module answer as a machine with *gpus* would."""

    def init() -> None:
        if init_error is not None:
            raise nv.NVMLError(init_error)

    def memory(h: FakeGpu) -> Any:
        if h.memory is None:
            raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(total=h.memory, free=h.memory, used=0)

    for attr, fn in {
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: gpus[i],
        "nvmlDeviceGetUUID": lambda h: h.uuid,
        "nvmlDeviceGetCudaComputeCapability": lambda h: h.cc,
        "nvmlDeviceGetName": lambda h: h.name,
        "nvmlDeviceGetArchitecture": lambda h: h.arch,
        "nvmlDeviceGetMemoryInfo": memory,
    }.items():
        monkeypatch.setattr(nv, attr, fn)
    monkeypatch.setattr(_nvml, "import_pynvml", lambda: nv)


def h200_gpu() -> FakeGpu:
    rec = load_record("nvml.json")
    return FakeGpu(
        name=rec["name"],
        cc=tuple(rec["cc"]),
        uuid=rec["uuid"],
        arch=rec["arch"],
        memory=rec["memory_total"],
    )


def gb10_gpu() -> FakeGpu:
    return FakeGpu(name="NVIDIA GB10", cc=(12, 1), uuid="GPU-0b10", arch=10, memory=None)


@pytest.fixture
def no_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """No torch, triton or DeepGEMM visible, whatever this machine has installed."""
    monkeypatch.setattr(_torch, "module_dir", lambda name: None)
    monkeypatch.setattr(_probes, "module_dir", lambda name: None)
    monkeypatch.setattr(_deep_gemm, "find_builds", lambda: (None, None))
    monkeypatch.setattr(_probes, "find_builds", lambda: (None, None))


def vendored_build(path: str = "/site/vllm/third_party/deep_gemm", sm120: bool = True) -> DeepGemmBuild:
    files = ("sm120_fp8_fp4_gemm_1d1d.cuh",) if sm120 else ()
    return DeepGemmBuild("vendored", path, "vllm", "2.5.0", None, files)


@pytest.fixture
def h200_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch and triton present, and vLLM 0.26.0's vendored DeepGEMM, as on the H200 run."""
    monkeypatch.setattr(_torch, "module_dir", lambda name: Path("/site") / name)
    monkeypatch.setattr(_probes, "module_dir", lambda name: Path("/site") / name)
    builds = (None, vendored_build())
    monkeypatch.setattr(_deep_gemm, "find_builds", lambda: builds)
    monkeypatch.setattr(_probes, "find_builds", lambda: builds)
