"""Installed package versions from metadata, and what those versions imply."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from ._base import Context, Cost, ProviderResult
from ._capabilities import TRITON_TARGETS, cutlass_dsl_sm121a_ok, triton_target_ok
from ._deep_gemm import build_facts, find_builds, in_use
from ._locate import dist_version, module_dir, read_assigned_string

__all__ = ["PACKAGE_DISTS", "PackagesProvider", "flashinfer_cubin_matches", "installed"]

#: ``<key>.version`` -> the distributions that install it, first found wins.
PACKAGE_DISTS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm",),
    "sglang": ("sglang",),
    "torch": ("torch",),
    "triton": ("triton", "pytorch-triton"),
    "cutlass_dsl": ("nvidia-cutlass-dsl",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "flashinfer_cubin": ("flashinfer-cubin",),
    "flashinfer_jit_cache": ("flashinfer-jit-cache",),
    "cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"),
    "humming": ("humming-kernels",),  # vLLM's cuda.txt pins it (0.1.6 in 0.24, 0.1.19 in 0.33)
    "b12x": ("b12x",),  # the optional `vllm[b12x]` extra
}
_PTXAS_ENV = ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")
#: FlashInfer skips its companion-version check when this is `1`.
_FI_NO_CHECK_ENV = "FLASHINFER_DISABLE_VERSION_CHECK"


def installed(keys: Iterable[str]) -> dict[str, object]:
    """``<key>.version`` of each of *keys* (of :data:`PACKAGE_DISTS`) that is installed, and the
    ``deep_gemm.*`` facts of the DeepGEMM build an engine would load: what an engine's plugin
    reads of its own process (metadata and files only; nothing is imported)."""
    values: dict[str, object] = {}
    for key in keys:
        found = next((v for v in map(dist_version, PACKAGE_DISTS[key]) if v is not None), None)
        if found is not None:
            values[f"{key}.version"] = found
    values.update(build_facts(in_use(*find_builds())))
    return values


class PackagesProvider:
    name = "packages"
    cost: Cost = "static"
    provides = (
        *(f"{k}.version" for k in PACKAGE_DISTS),
        "cuda.version",
        *(f"triton.{t}_ok" for t in TRITON_TARGETS),
        "cutlass_dsl.sm121a_ok",
        "flashinfer.cubin_matches",
    )

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        versions: dict[str, str] = {}
        for key, dists in PACKAGE_DISTS.items():
            for dist in dists:
                v = dist_version(dist)
                if v is not None:
                    versions[key] = v
                    res.put(f"{key}.version", v, "metadata")
                    res.raw[f"{key}.dist"] = dist
                    break
        torch_dir = module_dir("torch")
        if torch_dir is not None:
            cuda = read_assigned_string(torch_dir / "version.py", "cuda")
            res.put("cuda.version", cuda, "metadata")
            if cuda is None:
                res.notes.append("torch: built without CUDA (a CPU wheel)")
        triton = versions.get("triton")
        if triton is not None:
            overridden = [n for n in _PTXAS_ENV if ctx.env.get(n)]
            if overridden:
                res.notes.append(
                    f"triton: `{overridden[0]}` replaces the bundled ptxas, so the version tells "
                    "nothing of its targets (run with --probe)"
                )
            else:
                for target in TRITON_TARGETS:
                    res.put(f"triton.{target}_ok", triton_target_ok(triton, target), "metadata")
        flashinfer = versions.get("flashinfer")
        if flashinfer is not None:
            matches = flashinfer_cubin_matches(
                flashinfer, versions.get("flashinfer_cubin"), versions.get("flashinfer_jit_cache")
            )
            if matches is False and ctx.env.get(_FI_NO_CHECK_ENV) == "1":
                res.notes.append(f"flashinfer: companion versions differ; `{_FI_NO_CHECK_ENV}=1` skips the check")
                matches = True
            res.put("flashinfer.cubin_matches", matches, "metadata")
        cutlass = versions.get("cutlass_dsl")
        if cutlass is not None:
            res.put("cutlass_dsl.sm121a_ok", cutlass_dsl_sm121a_ok(cutlass), "metadata")
        return res


def flashinfer_cubin_matches(flashinfer: str, cubin: str | None, jit_cache: str | None) -> bool | None:
    """Whether FlashInfer's version check passes: each installed companion has its version.

    The check compares public versions (``0.6.16+cu130`` is ``0.6.16``); a companion that is not
    installed is not checked. ``None`` when a version does not parse.
    """
    try:
        want = Version(flashinfer).public
        return all(Version(v).public == want for v in (cubin, jit_cache) if v is not None)
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return None
