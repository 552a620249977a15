"""The nvcc that JIT compilers (DeepGEMM, FlashInfer) will run, and its CUDA release.

This is not the CUDA torch was built with (``cuda.version``): DeepGEMM and FlashInfer compile
their kernels at run time with whatever toolkit the environment points at, and an old one there
fails mid-load ("NVCC version should be >= 12.3", vllm#49051) or cannot target the GPU.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..._files import ReadError, read_bounded
from ._base import Context, Cost, ProviderResult, Runner
from ._subprocess import run_script

__all__ = ["NvccProvider", "find_nvcc", "parse_nvcc_version", "toolkit_json_version"]

#: Where torch's ``cpp_extension`` (which FlashInfer's JIT uses) and DeepGEMM look for a
#: toolkit, in order: ``$CUDA_HOME``, ``$CUDA_PATH``, ``nvcc`` on ``$PATH``, then this root.
DEFAULT_ROOT = Path("/usr/local/cuda")
_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+(?:\.\d+)?)")
_TIMEOUT_S = 15.0
#: The largest ``version.json`` read (CUDA 13's is 3 kB).
_MAX_JSON = 1 << 20


def find_nvcc(env: Mapping[str, str], default_root: Path | None = DEFAULT_ROOT) -> Path | None:
    """The nvcc a JIT compiler started with *env* would run, or ``None`` when there is none."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = env.get(var)
        if root:
            return Path(root) / "bin" / "nvcc"  # set means used, even when it is not there
    for folder in env.get("PATH", "").split(":"):
        cand = Path(folder) / "nvcc" if folder else None
        if cand is not None and cand.is_file():
            return cand
    if default_root is not None and (default_root / "bin" / "nvcc").is_file():
        return default_root / "bin" / "nvcc"
    return None


def toolkit_json_version(nvcc: Path) -> str | None:
    """``cuda_nvcc``'s version from the toolkit's ``version.json`` (CUDA 11.1+), or ``None``
    (also for a ``version.json`` that is a FIFO, a device or larger than :data:`_MAX_JSON`,
    which is not read: a FIFO there hung ``facts``)."""
    try:
        data = json.loads(read_bounded(nvcc.resolve().parent.parent / "version.json", _MAX_JSON))
    except (OSError, ValueError, RuntimeError, RecursionError, ReadError):  # RuntimeError: a link loop
        return None
    entry = data.get("cuda_nvcc") if isinstance(data, dict) else None
    version = entry.get("version") if isinstance(entry, dict) else None
    return version if isinstance(version, str) and version else None


def parse_nvcc_version(text: str) -> str | None:
    """The full version (``13.0.88``) from ``nvcc --version`` output, or ``None``."""
    m = _RELEASE.search(text)
    if m is None:
        return None
    full = m.group(2)
    return full if full.startswith(m.group(1)) else m.group(1)


class NvccProvider:
    """``nvcc.version``: read from the toolkit's ``version.json``, else ``nvcc --version``."""

    name = "nvcc"
    #: normally one small file; ``nvcc --version`` (a few ms, with a timeout) only without it
    cost: Cost = "static"
    provides = ("nvcc.version",)

    def __init__(self, default_root: Path | None = DEFAULT_ROOT, runner: Runner = run_script) -> None:
        #: ``ctx.runner`` runs Python probe scripts; nvcc is a plain binary, so it has its own
        self.default_root = default_root
        self.runner = runner

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        nvcc = find_nvcc(ctx.env, self.default_root)
        if nvcc is None:
            res.notes.append("nvcc: none found (CUDA_HOME, CUDA_PATH, PATH); JIT compilers cannot build kernels")
            return res
        res.raw["nvcc"] = {"path": str(nvcc)}
        if not nvcc.is_file():
            res.notes.append(f"nvcc: `{nvcc}` does not exist (CUDA_HOME/CUDA_PATH points there)")
            return res
        version = toolkit_json_version(nvcc)
        if version is None:
            version = self._ask(nvcc, ctx, res)
        res.put("nvcc.version", version, "metadata")
        return res

    def _ask(self, nvcc: Path, ctx: Context, res: ProviderResult) -> str | None:
        argv: Sequence[str] = [str(nvcc), "--version"]
        try:
            run = self.runner(argv, dict(ctx.env), min(ctx.timeout_s, _TIMEOUT_S))
        except OSError as exc:
            res.notes.append(f"nvcc: `{nvcc}` could not run ({exc.strerror or exc})")
            return None
        if run.timed_out:
            res.notes.append(f"nvcc: `{nvcc} --version` timed out")
            return None
        version = parse_nvcc_version(run.stdout)
        if version is None:
            res.notes.append(f"nvcc: `{nvcc} --version` printed no release (exit {run.returncode})")
        return version
