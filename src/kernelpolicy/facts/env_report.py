"""Readers of the environment reports engine issues carry: ``vllm collect-env`` (``python
collect_env.py``; its older ``Key: value`` form and its sectioned ``Key   : value`` form) and
``python3 -m sglang.check_env``.

An operator pastes the report of the machine that failed; kernelpolicy decides for that machine
without being on it (``explain --from-env-report FILE``, ``fleet --from FILE``). What a report
says becomes machine facts (the GPU, its count and compute capability, the driver, torch and its
CUDA, nvcc, the engine and kernel packages) and the engine variables it lists; what it does not
say stays unknown. Pure: text in, values out; nothing is imported or run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["EnvReport", "ReportError", "read_env_report"]


class ReportError(ValueError):
    """The text is no report kernelpolicy reads (the message says what was expected)."""


@dataclass(frozen=True)
class EnvReport:
    """What one report says."""

    kind: str  #: ``vllm collect-env`` or ``sglang check_env``
    values: Mapping[str, object]  #: machine facts, by fact key
    env: Mapping[str, str] = field(default_factory=dict)  #: the engine variables it lists
    gpu: str | None = None  #: the first GPU's product name, as the report writes it
    engine: str | None = None  #: ``vllm`` or ``sglang``: the engine the report is of


#: ``[pip3] name==version`` / ``[conda] name version`` lines of collect-env, and check_env's
#: ``name: version`` lines -> the fact each package's version is
_PACKAGES: Final = {
    "torch": "torch.version",
    "vllm": "vllm.version",
    "sglang": "sglang.version",
    "flashinfer-python": "flashinfer.version",
    "flashinfer_python": "flashinfer.version",
    "flashinfer": "flashinfer.version",
    "flashinfer-cubin": "flashinfer_cubin.version",
    "flashinfer_cubin": "flashinfer_cubin.version",
    "flashinfer-jit-cache": "flashinfer_jit_cache.version",
    "flashinfer_jit_cache": "flashinfer_jit_cache.version",
    "triton": "triton.version",
    "nvidia-cutlass-dsl": "cutlass_dsl.version",
    "nvidia-cudnn-cu12": "cudnn.version",
    "nvidia-cudnn-cu13": "cudnn.version",
    "deep-gemm": "deep_gemm.version",
    "deep_gemm": "deep_gemm.version",
}
_VERSION: Final = re.compile(r"(\d+(?:\.\d+){1,3}(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)")
_PIP: Final = re.compile(r"\[(?:pip3?|conda)\]\s+([A-Za-z0-9_.-]+)(?:==|\s+)(\S+)")
#: collect-env's ``Key: value`` or ``Key    : value`` (the key starts the line)
_FIELD: Final = re.compile(r"([A-Za-z][A-Za-z0-9 _/().-]*?)\s*:\s*(.*)\Z")
_ENV: Final = re.compile(r"((?:VLLM|SGLANG|SGL|CUDA|NCCL|TORCH|FLASHINFER|DG)_[A-Z0-9_]*)=(.*)\Z")
_GPU_LINE: Final = re.compile(r"GPU ([0-9, ]+): (.+)\Z")
_MAX_LINES: Final = 20_000


def _version(text: str) -> str | None:
    found = _VERSION.search(text)
    return found.group(1) if found else None


def _gpus(lines: list[str], start: int, first: str) -> list[str]:
    """The GPU product names after ``GPU models and configuration:`` (on its line, or the lines
    below it: ``GPU 0: NVIDIA H100 80GB HBM3``)."""
    names = []
    candidates = [first, *lines[start + 1 : start + 65]]
    for i, line in enumerate(candidates):
        m = _GPU_LINE.match(line.strip())
        if m:
            names.append(m.group(2).strip())
        elif i > 0 and line.strip():
            break
    return names


def _collect_env(lines: list[str]) -> EnvReport:
    values: dict[str, object] = {}
    env: dict[str, str] = {}
    gpus: list[str] = []
    in_env = False
    for i, raw in enumerate(lines):
        line = raw.strip()
        if "Environment Variables" in line:
            in_env = True
            continue
        if in_env and (m := _ENV.match(line)):
            env[m.group(1)] = m.group(2).strip()
            continue
        if (m := _PIP.match(line)) and m.group(1).lower() in _PACKAGES:
            version = _version(m.group(2))
            if version:
                values.setdefault(_PACKAGES[m.group(1).lower()], version)
            continue
        m = _FIELD.match(line)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        if key == "PyTorch version" and (v := _version(value)):
            values["torch.version"] = v
        elif key == "CUDA used to build PyTorch" and (v := _version(value)):
            values["cuda.version"] = v
        elif key == "Nvidia driver version" and (v := _version(value)):
            values["driver.version"] = v
        elif key == "vLLM Version" and (v := _version(value)):
            values["vllm.version"] = v
        elif key == "GPU models and configuration":
            gpus = _gpus(lines, i, value)
    return _report("vllm collect-env", values, env, gpus, engine="vllm" if "vllm.version" in values else None)


def _check_env(lines: list[str]) -> EnvReport:
    values: dict[str, object] = {}
    gpus: list[str] = []
    count = 0
    for raw in lines:
        line = raw.strip()
        if line.startswith("NVIDIA Topology"):
            break
        m = re.match(r"GPU ([0-9,]+) Compute Capability: (\d+\.\d+)\Z", line)
        if m:
            values["gpu.cc"] = m.group(2)
            continue
        m = _GPU_LINE.match(line)
        if m:
            gpus.append(m.group(2).strip())
            count += len([x for x in m.group(1).split(",") if x.strip()])
            continue
        key, sep, value = line.partition(": ")
        if not sep or "Module Not Found" in value:
            continue
        key = key.strip()
        if key == "NVCC" and (found := re.search(r"V(\d+\.\d+\.\d+)", value)):
            values["nvcc.version"] = found.group(1)
        elif key == "CUDA Driver Version" and (v := _version(value)):
            values["driver.version"] = v
        elif key == "PyTorch" and (v := _version(value)):
            values["torch.version"] = v
            cu = re.search(r"\+cu(\d{2,3})(\d)\b", value)
            if cu:
                values["cuda.version"] = f"{cu.group(1)}.{cu.group(2)}"
        elif key.lower() in _PACKAGES and (v := _version(value)):
            values.setdefault(_PACKAGES[key.lower()], v)
    if count:
        values["gpu.count"] = count
    return _report("sglang check_env", values, {}, gpus, engine="sglang" if "sglang.version" in values else None)


def _report(
    kind: str, values: dict[str, object], env: dict[str, str], gpus: list[str], engine: str | None
) -> EnvReport:
    if gpus:
        values.setdefault("gpu.count", len(gpus))
    return EnvReport(kind, values, env, gpus[0] if gpus else None, engine)


def read_env_report(text: str) -> EnvReport:
    """What a ``vllm collect-env`` or ``sglang.check_env`` report says.

    :raises ReportError: the text is neither (one line saying what each starts with).
    """
    lines = text.splitlines()[:_MAX_LINES]
    stripped = [line.strip() for line in lines]
    if any(s.startswith(("PyTorch version", "Collecting environment information")) for s in stripped):
        return _collect_env(lines)
    if any(s.startswith("CUDA Driver Version:") for s in stripped) or any(s.startswith("sglang: ") for s in stripped):
        return _check_env(lines)
    raise ReportError(
        "not a report kernelpolicy reads: expected the output of `vllm collect-env` (`python collect_env.py`:"
        " `PyTorch version ...`) or of `python3 -m sglang.check_env` (`CUDA Driver Version: ...`)"
    )
