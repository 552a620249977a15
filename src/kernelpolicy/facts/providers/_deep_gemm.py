"""Which DeepGEMM vLLM would load, and what its build contains, from files alone.

vLLM imports an external ``deep_gemm`` when one is importable and falls back to its own
copy, ``vllm.third_party.deep_gemm``. Several distributions install the module
``deep_gemm``; none of their version numbers says whether SM120 is supported. The JIT
headers do: ``include/deep_gemm/impls/sm120_*.cuh`` ship with the builds whose
scale-factor transform has the SM120 case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._base import Context, Cost, ProviderResult
from ._locate import dist_version, module_dir, owning_dist, read_assigned_string, read_small_text

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["DeepGemmBuild", "DeepGemmBuildProvider", "build_facts", "describe_build", "find_builds", "in_use"]

_SM120_GLOB = "include/deep_gemm/impls/sm120_*.cuh"
_COMMIT = re.compile(r"\+(?:g)?([0-9a-f]{7,40})\Z")


@dataclass(frozen=True)
class DeepGemmBuild:
    source: str  #: ``external`` or ``vendored``
    path: str
    dist: str | None
    version: str | None
    commit: str | None
    sm120_files: tuple[str, ...]

    @property
    def has_sm120_sf_layout(self) -> bool:
        return bool(self.sm120_files)

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "path": self.path,
            "dist": self.dist,
            "version": self.version,
            "commit": self.commit,
            "sm120_files": list(self.sm120_files),
        }


def describe_build(source: str, path: Path, dist: str | None, dist_ver: str | None) -> DeepGemmBuild:
    """What one DeepGEMM package folder holds (reads file names and ``__version__``)."""
    version = dist_ver or read_assigned_string(path / "__init__.py", "__version__")
    if version is None:
        version = (read_small_text(path / "VERSION") or "").strip() or None
    m = _COMMIT.search(version or "")
    sm120 = tuple(sorted(p.name for p in path.glob(_SM120_GLOB)))
    return DeepGemmBuild(source, str(path), dist, version, m.group(1) if m else None, sm120)


def find_builds() -> tuple[DeepGemmBuild | None, DeepGemmBuild | None]:
    """The external ``deep_gemm`` and vLLM's vendored copy, each ``None`` when absent."""
    external = None
    ext_dir = module_dir("deep_gemm")
    if ext_dir is not None:
        dist = owning_dist("deep_gemm")
        external = describe_build("external", ext_dir, dist, dist_version(dist) if dist else None)
    vendored = None
    vllm_dir = module_dir("vllm")
    if vllm_dir is not None:
        vend_dir = vllm_dir / "third_party" / "deep_gemm"
        if (vend_dir / "__init__.py").is_file():
            vendored = describe_build("vendored", vend_dir, "vllm", None)
    return external, vendored


def in_use(external: DeepGemmBuild | None, vendored: DeepGemmBuild | None) -> DeepGemmBuild | None:
    """vLLM's order: an external ``deep_gemm`` first, then its vendored copy."""
    return external if external is not None else vendored


def build_facts(build: DeepGemmBuild | None) -> dict[str, object]:
    """The ``deep_gemm.*`` facts of the build an engine loads (:func:`in_use`): ``source`` is
    ``none`` without one; what the build does not say is left unknown."""
    if build is None:
        return {"deep_gemm.source": "none"}
    values: dict[str, object | None] = {
        "deep_gemm.source": build.source,
        "deep_gemm.dist": build.dist,
        "deep_gemm.version": build.version,
        "deep_gemm.commit": build.commit,
        "deep_gemm.has_sm120_sf_layout": build.has_sm120_sf_layout,
    }
    return {k: v for k, v in values.items() if v is not None}


class DeepGemmBuildProvider:
    name = "deep_gemm_build"
    cost: Cost = "static"
    provides = (
        "deep_gemm.source",
        "deep_gemm.dist",
        "deep_gemm.version",
        "deep_gemm.commit",
        "deep_gemm.has_sm120_sf_layout",
    )

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        external, vendored = find_builds()
        res.raw["external"] = external.to_json() if external else None
        res.raw["vendored"] = vendored.to_json() if vendored else None
        build = in_use(external, vendored)
        for key, value in build_facts(build).items():
            res.put(key, value, "metadata")
        if build is None:
            res.notes.append("deep_gemm: neither an external `deep_gemm` nor vLLM's copy is installed")
            return res
        where = "an external `deep_gemm`" if build.source == "external" else "vLLM's vendored copy"
        marker = "has" if build.has_sm120_sf_layout else "has no"
        res.notes.append(
            f"deep_gemm: vLLM would load {where} ({build.dist or 'unknown dist'} "
            f"{build.version or '?'}), which {marker} SM120 kernels (include/…/impls/sm120_*.cuh)"
        )
        if external is not None and vendored is not None:
            res.notes.append("deep_gemm: the external one shadows vLLM's vendored copy")
        return res
