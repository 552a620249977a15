"""The seed cases on real vLLM 0.26.0 and 0.33.0 from PyPI, on a simulated GPU."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.vllm

QWEN = "Qwen/Qwen3.6-35B-A3B-FP8"
GEMMA = "RedHatAI/gemma-4-31B-it-FP8-block"
DSV4 = "deepseek-ai/DeepSeek-V4-Flash"


def _detail(r: Any) -> str:
    return f"backends={r.backends()} errors={dict(r.errors)}\n{r.output[-3000:]}"


def test_026_sm121_qwen_reproduces_the_seed_divergence(sim: Any) -> None:
    r = sim("0.26.0", "sm121", QWEN)
    assert r.ok, _detail(r)
    assert r.vllm_version == "0.26.0"
    assert r.auto_disable_warning and "qwen3_5_moe_text" in r.auto_disable_warning
    assert r.dense is not None and r.dense.kernel == "CutlassFp8BlockScaledMMKernel"
    assert r.moe is not None and r.moe.backend == "DEEPGEMM"
    assert r.warmup is not None and r.warmup.moe is True
    assert any("moe runs DEEPGEMM" in d for d in r.divergences())


def test_026_sm121_qwen_with_plugin_is_consistent(sim: Any) -> None:
    r = sim("0.26.0", "sm121", QWEN, plugin=True)
    assert r.ok, _detail(r)
    assert r.plugin is not None and r.plugin["registered"] and not r.plugin["warnings"]
    assert r.dense is not None and r.dense.kernel == "CutlassFp8BlockScaledMMKernel"
    assert r.moe is not None and r.moe.backend == "TRITON"
    assert r.warmup is not None and not r.warmup.dense and not r.warmup.moe
    assert r.divergences() == []
    assert r.router is not None and r.router.backend != "bf16x3"


def test_033_env_deep_gemm_diverges_natively(sim: Any) -> None:
    r = sim("0.33.0", "sm121", QWEN, env={"VLLM_USE_DEEP_GEMM": "1"})
    assert r.ok, _detail(r)
    assert r.dense is not None and r.dense.backend == "cutlass"
    assert r.moe is not None and r.moe.backend == "DEEPGEMM"
    assert r.divergences()


def test_033_env_deep_gemm_agrees_with_plugin(sim: Any) -> None:
    r = sim("0.33.0", "sm121", QWEN, env={"VLLM_USE_DEEP_GEMM": "1"}, plugin=True)
    assert r.ok, _detail(r)
    assert r.plugin is not None
    (decision,) = r.plugin["decisions"]
    assert r.backends()["dense"] == decision["paths"]["dense"]["backend"]
    assert r.backends()["moe"] == decision["paths"]["moe"]["backend"]
    assert r.divergences() == []


def test_026_sm120_gemma_without_sm120_deep_gemm_selects_cutlass(sim: Any) -> None:
    facts = {"deep_gemm.has_sm120_sf_layout": False}
    native = sim("0.26.0", "sm120", GEMMA)
    assert native.dense is not None, _detail(native)
    assert native.dense.backend == "deep_gemm", "0.26 picks DeepGEMM natively: the #47130 crash"
    r = sim("0.26.0", "sm120", GEMMA, plugin=True, facts=facts)
    assert r.ok, _detail(r)
    assert r.dense is not None and r.dense.kernel == "CutlassFp8BlockScaledMMKernel"
    assert r.warmup is not None and not r.warmup.dense


@pytest.mark.parametrize("version", ["0.26.0", "0.33.0"])
def test_router_never_bf16x3_on_sm121(sim: Any, version: str) -> None:
    r = sim(version, "sm121", QWEN, plugin=True)
    assert r.router is not None, _detail(r)
    assert not r.router.flags.get("allow_bf16x3_router_gemm")
    assert r.router.backend != "bf16x3"
