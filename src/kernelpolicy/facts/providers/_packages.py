"""Installed package versions from metadata, and what those versions imply."""

from __future__ import annotations

from ._base import Context, Cost, ProviderResult
from ._capabilities import TRITON_TARGETS, cutlass_dsl_sm121a_ok, triton_target_ok
from ._locate import dist_version, module_dir, read_assigned_string

__all__ = ["PACKAGE_DISTS", "PackagesProvider"]

#: ``<key>.version`` -> the distributions that install it, first found wins.
PACKAGE_DISTS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm",),
    "torch": ("torch",),
    "triton": ("triton", "pytorch-triton"),
    "cutlass_dsl": ("nvidia-cutlass-dsl",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
}
_PTXAS_ENV = ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")


class PackagesProvider:
    name = "packages"
    cost: Cost = "static"
    provides = (
        *(f"{k}.version" for k in PACKAGE_DISTS),
        "cuda.version",
        *(f"triton.{t}_ok" for t in TRITON_TARGETS),
        "cutlass_dsl.sm121a_ok",
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
        cutlass = versions.get("cutlass_dsl")
        if cutlass is not None:
            res.put("cutlass_dsl.sm121a_ok", cutlass_dsl_sm121a_ok(cutlass), "metadata")
        return res
