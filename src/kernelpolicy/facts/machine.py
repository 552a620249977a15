"""What this machine is: run the fact providers, cache the costly ones, and say where each
fact came from.

``gather()`` never raises for a missing driver, GPU or package, nor for a probe that crashed
or timed out: those become notes (and ``gpu`` is ``None`` with a reason).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .providers import (
    Context,
    Provider,
    ProviderResult,
    cache_key,
    default_cache_dir,
    default_providers,
    device_identity,
    read_cache,
    write_cache,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .record import Facts

__all__ = ["SCHEMA", "GpuInfo", "MachineFacts", "auto_gpu_facts", "gather", "to_facts"]

SCHEMA = "kernelpolicy.machine/1"
_CACHED_COSTS = ("subprocess", "probe")
#: Bump when a probe script or the meaning of a cached fact changes.
_PROBE_VERSION = 1


@dataclass(frozen=True)
class GpuInfo:
    """The GPU the facts describe (the first CUDA-visible one)."""

    name: str | None
    sm: str | None
    cc: str
    count: int
    source: str  #: ``nvml`` or ``torch``
    memory_mib: int | None = None
    unified_memory: bool | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "sm": self.sm,
            "cc": self.cc,
            "count": self.count,
            "memory_mib": self.memory_mib,
            "unified_memory": self.unified_memory,
            "source": self.source,
        }


@dataclass(frozen=True)
class MachineFacts:
    """Facts about this machine with a source for each, and notes on what is unknown and why."""

    values: Mapping[str, object]
    sources: Mapping[str, str]
    notes: tuple[str, ...]
    gpu: GpuInfo | None
    gpu_reason: str | None  #: why ``gpu`` is ``None``
    providers: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    raw: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    cache: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "gpu": self.gpu.to_json() if self.gpu else None,
            "gpu_reason": self.gpu_reason,
            "facts": {k: self.values[k] for k in sorted(self.values)},
            "sources": {k: self.sources[k] for k in sorted(self.sources)},
            "notes": list(self.notes),
            "providers": {k: dict(v) for k, v in self.providers.items()},
            "cache": dict(self.cache),
            "raw": {k: dict(v) for k, v in self.raw.items()},
        }


def _key_parts(ctx: Context, known: Mapping[str, object], raw: Mapping[str, Mapping[str, object]]) -> dict[str, object]:
    """Pure: what the costly providers' results depend on."""
    versions = {k: v for k, v in known.items() if k.endswith(".version")}
    dg = raw.get("deep_gemm_build", {})
    return {
        "probe_version": _PROBE_VERSION,
        "python": [ctx.python, sys.version],
        "driver": known.get("driver.version"),
        "device": raw.get("nvml", {}).get("device"),
        "devices": device_identity(),  # read on every run, with or without NVML
        "versions": versions,
        "deep_gemm": [dg.get("external"), dg.get("vendored"), _mtimes(dg)],
        "env": {
            n: ctx.env.get(n) for n in ("CUDA_VISIBLE_DEVICES", "TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")
        },
    }


def _mtimes(dg: Mapping[str, object]) -> list[int]:
    """Modification times of the DeepGEMM packages (a rebuilt source install keeps its version)."""
    out = []
    for item in (dg.get("external"), dg.get("vendored")):
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            try:
                out.append(max(p.stat().st_mtime_ns for p in Path(item["path"]).glob("*")))
            except (OSError, ValueError):
                out.append(0)
    return out


_GPU_IDENTITY = ("gpu.cc", "gpu.sm", "gpu.family")


def _contradiction(
    stored: Mapping[str, ProviderResult], fresh: Mapping[str, object], devices: Sequence[str] = ("?",)
) -> str | None:
    """Pure: a cached GPU identity that contradicts what this run read itself, or ``None``.

    A cached GPU is believed only when this run sees an NVIDIA device itself (NVML's ``gpu.cc``
    or a PCI device in *devices*): a GPU-less machine is not made "a GB10" by a cache file.
    """
    if not devices and "gpu.cc" not in fresh:
        for name, res in stored.items():
            if "gpu.cc" in res.values or "gpu.sm" in res.values:
                gpu = res.values.get("gpu.name") or res.values.get("gpu.sm") or res.values.get("gpu.cc")
                return f"a cached GPU `{gpu}` from `{name}`: this machine shows no NVIDIA device (NVML, PCI)"
    for name, res in stored.items():
        for k in _GPU_IDENTITY:
            if k in res.values and k in fresh and res.values[k] != fresh[k]:
                return f"cached `{k}` = `{res.values[k]}` from `{name}`: this machine has `{fresh[k]}`"
    return None


def _run(provider: Provider, ctx: Context) -> ProviderResult:
    try:
        return provider.collect(ctx)
    except Exception as exc:  # a provider's bug must not take the caller down
        return ProviderResult(notes=[f"{provider.name}: failed ({type(exc).__name__}: {exc})"])


def _gpu(values: Mapping[str, object], sources: Mapping[str, str]) -> GpuInfo | None:
    cc = values.get("gpu.cc")
    if not isinstance(cc, str):
        return None
    name, sm, count = values.get("gpu.name"), values.get("gpu.sm"), values.get("gpu.count")
    mem, unified = values.get("gpu.memory_mib"), values.get("gpu.unified_memory")
    return GpuInfo(
        name=name if isinstance(name, str) else None,
        sm=sm if isinstance(sm, str) else None,
        cc=cc,
        count=count if isinstance(count, int) else 1,
        source=sources.get("gpu.cc", "nvml"),
        memory_mib=mem if isinstance(mem, int) else None,
        unified_memory=unified if isinstance(unified, bool) else None,
    )


def gather(  # noqa: PLR0915 (predates the lint; split in a follow-up)
    *,
    probe: bool = False,
    refresh: bool = False,
    cache_dir: Path | None = None,
    use_cache: bool = True,
    env: Mapping[str, str] | None = None,
    providers: Sequence[Provider] | None = None,
    context: Context | None = None,
) -> MachineFacts:
    """Gather this machine's facts.

    Static and NVML providers always run (they are cheap and make the cache key); the
    subprocess ones (torch) and, with *probe*, the live probes come from the disk cache when
    its key matches, unless *refresh*.
    """
    ctx = context or Context(env=dict(os.environ if env is None else env))
    chosen = tuple(providers) if providers is not None else default_providers()
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    info: dict[str, dict[str, object]] = {}
    raw: dict[str, dict[str, object]] = {}
    results: dict[str, ProviderResult] = {}

    def merge(p: Provider, res: ProviderResult, cached: bool, seconds: float) -> None:
        values.update(res.values)
        sources.update(res.sources)
        notes.extend(res.notes)
        results[p.name] = res
        if res.raw:
            raw[p.name] = dict(res.raw)
        info[p.name] = {"cost": p.cost, "cached": cached, "seconds": round(seconds, 3)}

    cheap = [p for p in chosen if p.cost not in _CACHED_COSTS]
    costly = [p for p in chosen if p.cost in _CACHED_COSTS and (probe or p.cost != "probe")]
    for p in cheap:
        t0 = time.monotonic()
        merge(p, _run(p, ctx.with_known(values)), False, time.monotonic() - t0)

    parts = _key_parts(ctx, values, raw)
    key = cache_key(parts)
    directory = cache_dir or default_cache_dir(ctx.env)
    stored: dict[str, ProviderResult] = {}
    if not use_cache:
        status = "off"
    elif refresh:
        status = "refresh"
    else:
        # every cached provider's entries are valid here, the probes' too when this run does not probe:
        # they are kept (written back below) for the next `--probe`, not discarded (issue #36)
        cached = [p for p in chosen if p.cost in _CACHED_COSTS]
        read = read_cache(directory, key, {p.name: tuple(p.provides) for p in cached})
        stored, status = read.results, read.status
        devices = parts.get("devices")
        problem = read.problem or _contradiction(stored, values, devices if isinstance(devices, list) else ())
        if problem:
            stored, status = {}, "invalid" if read.status != "unreadable" else status
            notes.append(
                f"cache: ignored {problem}; gathered again (`kernelpolicy facts --refresh` rewrites the cache)"
            )
    ran_any = False
    for p in costly:
        if p.name in stored:
            merge(p, stored[p.name], True, 0.0)
            continue
        t0 = time.monotonic()
        merge(p, _run(p, ctx.with_known(values)), False, time.monotonic() - t0)
        ran_any = True
    if use_cache and ran_any:
        keep = {**stored, **{p.name: results[p.name] for p in costly}}
        problem = write_cache(directory, key, parts, keep)
        if problem:
            notes.append(problem)

    gpu = _gpu(values, sources)
    reason = None
    if gpu is None:
        absent = raw.get("nvml", {}).get("gpu_absent")
        reason = str(absent) if absent else "no GPU found by NVML or torch"
    return MachineFacts(
        values=values,
        sources=sources,
        notes=tuple(notes),
        gpu=gpu,
        gpu_reason=reason,
        providers=info,
        raw=raw,
        cache={"dir": str(directory), "key": key, "status": status},
    )


def to_facts(machine: MachineFacts) -> Facts:
    """The machine's facts as a :class:`~kernelpolicy.facts.record.Facts` record.

    Values are checked against the vocabulary; one that does not fit is left out (unknown),
    which only a provider bug can cause.
    """
    from ..errors import FactError
    from .record import Facts, FactValue, normalise_value

    checked: dict[str, FactValue] = {}
    for k, v in machine.values.items():
        try:
            checked[k] = normalise_value(k, v)
        except FactError:
            continue
    return Facts(
        values=checked,
        sources={k: machine.sources.get(k, "metadata") for k in checked},
    )


def auto_gpu_facts(
    *, cache_dir: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[dict[str, object], dict[str, str]]:
    """This machine's facts (no live probes; cached) for ``--gpu auto``.

    :raises ValueError: ``no NVIDIA GPU found: <reason>`` when there is none.
    """
    machine = gather(cache_dir=cache_dir, env=env)
    if machine.gpu is None:
        raise ValueError(f"no NVIDIA GPU found: {machine.gpu_reason}")
    return dict(machine.values), dict(machine.sources)
