"""The vLLM selection points kernelpolicy patches, per release, built from ``releases.json``.

The data file is written by :mod:`._scan` from each release's wheel (0.24 on; :func:`known_span`
names them) and never edited; this module only turns a release's record into
the few values the plugin patches by. Releases are keyed by ``major.minor``; the scanned patch
release (the newest scanned one of that minor) is :attr:`VllmPatchPoints.scanned`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from packaging.version import Version

from ._scan import RELEASES_FILE
from .modules import (
    DEEP_GEMM_KERNEL_CLASS,
    DENSE_MODULE,
    DG_KERNEL_MODULE,
    DG_UTILS_MODULE,
    GATE_LINEAR_MODULE,
    KERNEL_WARMUP_MODULE,
    MOE_ORACLE_MODULE,
    WARMUP_MODULE,
)

__all__ = [
    "DEEP_GEMM_KERNEL_CLASS",
    "DENSE_MODULE",
    "DG_KERNEL_MODULE",
    "DG_UTILS_MODULE",
    "GATE_LINEAR_MODULE",
    "KERNEL_WARMUP_MODULE",
    "MOE_ORACLE_MODULE",
    "RELEASES_FILE",
    "SUPPORTED",
    "WARMUP_MODULE",
    "MoeOracle",
    "VllmPatchPoints",
    "known_span",
    "patch_points_for",
    "release_records",
    "unread_env",
]


@dataclass(frozen=True)
class MoeOracle:
    """The MoE oracle of one expert quantization scheme (``oracle/{mxfp4,mxfp8,nvfp4}.py``).

    Every ``select_*`` function here reads ``FusedMoEConfig.moe_backend`` first: any value
    other than ``"auto"`` is looked up in the oracle's own name map (:attr:`names`) and that
    backend is returned or refused (``ValueError``); ``"auto"`` walks vLLM's priority list.
    """

    scheme: Literal["mxfp4", "mxfp8", "nvfp4"]
    module: str
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


@dataclass(frozen=True)
class VllmPatchPoints:
    """Where one vLLM release decides each FP8 path, and what an adapter must patch there."""

    release: str  #: ``major.minor``
    scanned: str  #: the exact release the data was read from
    #: modules holding a by-name copy of ``should_auto_disable_deep_gemm`` (besides its own)
    auto_disable_importers: tuple[str, ...]
    #: the dense DeepGEMM warmup selector in ``deep_gemm_warmup``
    dense_warmup_gate: str
    #: MoE DeepGEMM warmup selectors in ``deep_gemm_warmup``
    moe_warmup_gates: tuple[str, ...]
    #: by-name importers of ``select_fp8_moe_backend``
    moe_select_importers: tuple[str, ...]
    #: the MoE oracles of the non-FP8 expert schemes
    moe_oracles: tuple[MoeOracle, ...]
    #: the release's whole record in ``releases.json`` (what the rules are generated from)
    record: Mapping[str, Any]
    #: the modules patched (the kernel tables are globals of the dense module, so patching
    #: them there reaches every by-name importer of ``init_fp8_linear_kernel``)
    dense_module: str = DENSE_MODULE
    moe_oracle_module: str = MOE_ORACLE_MODULE
    warmup_module: str = WARMUP_MODULE
    gate_linear_module: str = GATE_LINEAR_MODULE


def _oracle(scheme: Literal["mxfp4", "mxfp8", "nvfp4"], r: Mapping[str, Any]) -> MoeOracle:
    return MoeOracle(
        scheme=scheme,
        module=r["module"],
        functions=tuple(r["functions"]),
        enum=r["enum"],
        backends=tuple(r["backends"]),
        names=tuple(r["names"]),
        importers=tuple(r["importers"]),
    )


def _points(r: Mapping[str, Any]) -> VllmPatchPoints:
    v = Version(r["version"])
    gates = r["warmup"]["gates"]
    return VllmPatchPoints(
        release=f"{v.major}.{v.minor}",
        scanned=r["version"],
        auto_disable_importers=tuple(m for m in r["auto_disable"]["importers"] if m != DG_UTILS_MODULE),
        dense_warmup_gate=next(g for g in gates if "linear" in g),
        moe_warmup_gates=tuple(g for g in gates if "linear" not in g),
        moe_select_importers=tuple(r["moe"]["fp8"]["importers"]),
        moe_oracles=(
            _oracle("mxfp4", r["moe"]["mxfp4"]),
            _oracle("mxfp8", r["moe"]["mxfp8"]),
            _oracle("nvfp4", r["moe"]["nvfp4"]),
        ),
        record=r,
    )


@functools.cache
def release_records() -> Mapping[str, Mapping[str, Any]]:
    """Every scanned release's record (exact version -> record), oldest first."""
    data: dict[str, Any] = json.loads(RELEASES_FILE.read_text(encoding="utf-8"))["releases"]
    return dict(sorted(data.items(), key=lambda kv: Version(kv[0])))


def _supported() -> dict[str, VllmPatchPoints]:
    out: dict[str, VllmPatchPoints] = {}
    for record in release_records().values():  # oldest first: a later patch release wins
        p = _points(record)
        out[p.release] = p
    return out


#: Releases the adapter knows, by ``major.minor``.
SUPPORTED: Final[dict[str, VllmPatchPoints]] = _supported()


def known_span() -> str:
    """The releases the adapter knows, as messages name them: runs of consecutive minors as
    ``first-last`` (``0.24-0.34``), read from the release data, so a newly scanned release is
    named without an edit."""
    minors = sorted((Version(k) for k in SUPPORTED), key=lambda v: (v.major, v.minor))
    runs: list[list[Version]] = []
    for v in minors:
        if runs and v.major == runs[-1][-1].major and v.minor == runs[-1][-1].minor + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(
        f"{r[0].major}.{r[0].minor}" + (f"-{r[-1].major}.{r[-1].minor}" if len(r) > 1 else "") for r in runs
    )


def patch_points_for(version: str) -> VllmPatchPoints | None:
    """The patch points of the vLLM release *version* (any patch level), or ``None``."""
    try:
        v = Version(version)
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return None
    return SUPPORTED.get(f"{v.major}.{v.minor}")


def unread_env(version: str, names: Iterable[str]) -> dict[str, str]:
    """Of *names*, the variables vLLM *version* does not read though another scanned release
    does: name -> the releases that read it (``"0.24.0 to 0.28.0"``). Empty for a release
    that was not scanned (nothing is known of it) and for variables no scanned release reads
    (another engine's, or not vLLM's at all)."""
    try:
        v = Version(version)
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return {}
    points = SUPPORTED.get(f"{v.major}.{v.minor}")
    if points is None:
        return {}
    reads = set(points.record["env"])
    out: dict[str, str] = {}
    for name in names:
        readers = [r for r, rec in release_records().items() if name in rec["env"]]
        if readers and name not in reads:
            out[name] = readers[0] if len(readers) == 1 else f"{readers[0]} to {readers[-1]}"
    return out
