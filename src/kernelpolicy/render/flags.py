"""Engine vocabularies: how a decision reads as an engine's own flags and environment.

The names themselves are data (``rules/engines/<engine>.yaml``); this module turns a decision
into the settings that reproduce it on an engine without the kernelpolicy plugin, where
settings can.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..decision import Decision, PathDecision
    from ..policy import EngineMap, Policy


class _Facts(Protocol):
    def get(self, key: str) -> object: ...


__all__ = ["engine_flags", "with_engine_flags"]

_DEEP_GEMM_DENSE = ("deep_gemm", "flashinfer_deep_gemm")


def engine_flags(
    paths: Mapping[str, PathDecision],
    engine: EngineMap,
    release: str | None = None,
    facts: _Facts | None = None,
) -> dict[str, Any]:
    """``{"env": {...}, "args": [...], "notes": [...]}`` that reproduce *paths* on *engine*.

    *release* names the engine release where its flags differ between releases (SGLang; the
    newest known release when None). *facts* are the decision's (their ``quant.scheme`` and
    ``quant.moe_scheme``: an engine may name one backend differently per format).
    """
    if engine.name == "vllm":
        out = _vllm(paths, engine)
        _vllm_attention(paths, facts, out)
        return out
    if engine.name == "sglang":
        return _sglang(paths, engine, release, facts)
    return {"env": {}, "args": [], "notes": [f"no flag mapping for engine `{engine.name}`"]}


def with_engine_flags(decision: Decision, policy: Policy, releases: Mapping[str, str] | None = None) -> Decision:
    """*decision* with the settings that reproduce it on its engine (``deploy.engine``; vLLM when
    unset), from *policy*'s vocabulary of that engine (its ``engine`` section): the resolver
    decides, the flags are rendered here, at the edge.

    Only the decision's own engine gets settings: a decision holds for one engine (its rules
    and the facts it assumed are that engine's), so another engine's flags rendered from it
    could name a backend that engine's decision rejects (``--fp8-gemm-backend cutlass`` for an
    SGLang on B200, from the vLLM decision). No settings when the policy has no vocabulary of it.

    *releases* names an engine's release where its flags differ between releases (``{"sglang":
    "0.5.23"}``; the newest known release of an engine not named).
    """
    name = str(decision.facts.get("deploy.engine") or "vllm")
    named = releases or {}
    vocabulary = policy.engines.get(name)
    engine = (
        {} if vocabulary is None else {name: engine_flags(decision.paths, vocabulary, named.get(name), decision.facts)}
    )
    return dataclasses.replace(decision, engine=engine)


def _deep_gemm_use(paths: Mapping[str, PathDecision]) -> tuple[bool, bool, bool]:
    """Whether dense and MoE run DeepGEMM, and whether they do with none of its kernels warmed."""
    dense, moe = paths["dense"], paths["moe"]
    warm = set(paths["warmup"].kernels or ())
    jit = {f"{p.backend}.{name}" for name, p in (("dense", dense), ("moe", moe)) if p.backend in _DEEP_GEMM_DENSE}
    return dense.backend in _DEEP_GEMM_DENSE, moe.backend == "deep_gemm", bool(jit) and not jit & warm


def _vllm(paths: Mapping[str, PathDecision], engine: EngineMap) -> dict[str, Any]:
    env: dict[str, str] = {}
    args: list[str] = []
    notes: list[str] = []
    dense, moe, router = paths["dense"], paths["moe"], paths["router"]
    dg_dense, dg_moe, unwarmed = _deep_gemm_use(paths)
    if not dg_dense and not dg_moe:
        env["VLLM_USE_DEEP_GEMM"] = "0"
    elif dg_dense and not dg_moe and moe.applicable:
        env["VLLM_MOE_USE_DEEP_GEMM"] = "0"
    if unwarmed:
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


# --- attention (issue #39)
def _vllm_attention(paths: Mapping[str, PathDecision], facts: _Facts | None, out: dict[str, Any]) -> None:
    """``--attention-backend NAME`` where vLLM's own order would not pick the decided backend: a
    rule moved the path, or the deployment chose it. The catalog's requirements are vLLM's own
    checks, so elsewhere vLLM picks the decided backend itself and the line stays as it is."""
    from ..releases.vllm.attention import vllm_names

    p = paths.get("attention")
    if p is None or p.backend is None or not (p.rules or p.preferred_by or p.explicit):
        return
    mla = facts is not None and facts.get("model.mla") is True
    family = facts.get("gpu.family") if facts is not None else None
    names = vllm_names(p.backend, mla=mla, family=str(family) if family else None)
    if names:
        out["args"] += ["--attention-backend", names[0]]
    else:
        out["notes"].append(f"vLLM has no `--attention-backend` value for `{p.backend}`")


# --- end of attention


def _sglang(
    paths: Mapping[str, PathDecision], engine: EngineMap, release: str | None, facts: _Facts | None
) -> dict[str, Any]:
    from ..releases.sglang.versions import latest_release, release_for

    rel = release_for(release) if release else latest_release()
    if rel is None:
        return {"env": {}, "args": [], "notes": [f"sglang `{release}` is not a release kernelpolicy has scanned"]}
    env: dict[str, str] = {}
    args: list[str] = []
    notes: list[str] = []
    dense, moe, router = paths["dense"], paths["moe"], paths["router"]
    dg_dense, dg_moe, unwarmed = _deep_gemm_use(paths)
    if not dg_dense and not dg_moe:
        env["SGLANG_ENABLE_JIT_DEEPGEMM"] = "0"
        notes.append("SGL_ENABLE_JIT_DEEPGEMM, when set, wins over SGLANG_ENABLE_JIT_DEEPGEMM: leave it unset")
    if unwarmed:
        env["SGLANG_JIT_DEEPGEMM_PRECOMPILE"] = "0"
    if dense.applicable and dense.backend is not None:
        name = (engine.dense_kernels.get(dense.backend) or ("",))[0]
        scheme = str(facts.get("quant.scheme") or "") if facts is not None else ""
        fp4, fp8 = scheme == "nvfp4", scheme in ("fp8_block", "mxfp8")
        # per-tensor and per-channel FP8 linears run what `apply_fp8_linear` picks per call; the
        # FP8 GEMM flag does not steer them, yet SGLang still validates it for every FP8 linear
        per_tensor = scheme in ("fp8_tensor", "fp8_channel")
        wanted = [f for f, of in (("--fp8-gemm-backend", not fp4), ("--fp4-gemm-backend", not fp8)) if of]
        flags = [f for f in wanted if name and rel.accepts(f, name) and not per_tensor]
        for f in flags:
            args += [f, name]
        if len(flags) > 1:
            notes.append("only the GEMM flag of the checkpoint's format (FP8 or NVFP4) takes effect")
        fp8_linears = fp8 or per_tensor or not scheme  # the variables name FP8 linears only
        if not flags and fp8_linears and dense.backend in engine.dense_env:
            env.update(engine.dense_env[dense.backend])
        elif not flags and not per_tensor:
            notes.append(f"SGLang {rel.version} has no dense GEMM flag value for `{dense.backend}`")
        notes.append(
            "the GEMM flags act on block-FP8, MXFP8 and NVFP4 linears; per-tensor and per-channel FP8 "
            "linears have no SGLang flag"
        )
    if moe.applicable and moe.backend is not None:
        flag = engine.moe_flag_for(moe.backend, facts.get("quant.moe_scheme") if facts is not None else None)
        if flag and rel.accepts("--moe-runner-backend", flag):
            args += ["--moe-runner-backend", flag]
        else:
            notes.append(f"SGLang {rel.version} has no `--moe-runner-backend` value for `{moe.backend}`")
    if router.applicable and router.backend is not None:
        holds = "router_tier" in rel.selection_points
        notes.append(
            "no SGLang flag selects the router kernel: "
            + ("the plugin holds the DeepSeek gate's tier" if holds else f"on SGLang {rel.version} the gate picks it")
        )
    notes.append("SGLang falls back to Triton per layer for shapes a backend cannot run; the plugin names such layers")
    return {"env": env, "args": args, "notes": notes}
