"""Engine vocabularies: how a decision reads as an engine's own flags and environment.

The names themselves are data (``rules/engines/<engine>.yaml``); this module turns a decision
into the settings that reproduce it on an engine without the kernelpolicy plugin, where
settings can.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..decision import PathDecision
    from ..policy import EngineMap

__all__ = ["engine_flags"]

_DEEP_GEMM_DENSE = ("deep_gemm", "flashinfer_deep_gemm")


def engine_flags(paths: Mapping[str, PathDecision], engine: EngineMap) -> dict[str, Any]:
    """``{"env": {...}, "args": [...], "notes": [...]}`` that reproduce *paths* on *engine*."""
    if engine.name == "vllm":
        return _vllm(paths, engine)
    return {"env": {}, "args": [], "notes": [f"no flag mapping for engine `{engine.name}`"]}


def _vllm(paths: Mapping[str, PathDecision], engine: EngineMap) -> dict[str, Any]:
    env: dict[str, str] = {}
    args: list[str] = []
    notes: list[str] = []
    dense, moe, router = paths["dense"], paths["moe"], paths["router"]
    dg_dense = dense.backend in _DEEP_GEMM_DENSE
    dg_moe = moe.backend == "deep_gemm"
    if not dg_dense and not dg_moe:
        env["VLLM_USE_DEEP_GEMM"] = "0"
    elif dg_dense and not dg_moe and moe.applicable:
        env["VLLM_MOE_USE_DEEP_GEMM"] = "0"
    warm = set(paths["warmup"].kernels or ())
    jit = {f"{p.backend}.{name}" for name, p in (("dense", dense), ("moe", moe)) if p.backend in _DEEP_GEMM_DENSE}
    if jit and not jit & warm:
        env["VLLM_DEEP_GEMM_WARMUP"] = "skip"
    disabled: list[str] = []
    for c in dense.candidates:
        if c.verdict == "chosen":
            break
        if c.verdict != "rejected" or any(r.startswith("catalog.") for r in c.rules):
            continue  # the engine's own checks reject what the catalog rejects
        if c.backend in _DEEP_GEMM_DENSE and env.get("VLLM_USE_DEEP_GEMM") == "0":
            continue
        disabled += list(engine.dense_kernels.get(c.backend, ()))
    if disabled:
        env["VLLM_DISABLED_KERNELS"] = ",".join(dict.fromkeys(disabled))
    if moe.backend is not None:
        flag = engine.moe_flag.get(moe.backend)
        if flag:
            args += ["--moe-backend", flag]
        else:
            notes.append(f"vLLM has no `--moe-backend` value for `{moe.backend}`")
    if router.backend is not None:
        notes.append("no vLLM flag selects the router kernel: the plugin applies it")
    return {"env": env, "args": args, "notes": notes}
