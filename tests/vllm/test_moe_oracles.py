"""The non-FP8 MoE oracles (MXFP4 here) on real vLLM 0.34.0, on a simulated GB10 (sm121)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.vllm

DSV4 = "deepseek-ai/DeepSeek-V4-Flash"
_ORACLE = "vllm.model_executor.layers.quantization.mxfp4.select_deepseek_v4_mxfp4_moe_backend"


def _detail(r: Any) -> str:
    return f"moe={r.moe} errors={dict(r.errors)}\n{r.output[-3000:]}"


def test_034_sm121_dsv4_mxfp4_experts_natively_run_deep_gemm(sim: Any) -> None:
    """DeepSeek-V4-Flash's MXFP4 experts: vLLM's own MXFP4 oracle picks DeepGEMM FP8xFP4 on GB10,
    the grouped GEMM that fails there in scale packing (rule deep_gemm-mxfp4-gb10-scale-packing)."""
    r = sim("0.34.0", "sm121", DSV4)
    assert r.ok, _detail(r)
    assert r.moe is not None and r.moe.scheme == "mxfp4" and r.moe.via == _ORACLE
    assert r.moe.backend == "DEEPGEMM_MXFP4" and r.moe.backend_id == "deep_gemm"


def test_034_sm121_dsv4_mxfp4_experts_follow_the_decision_with_plugin(sim: Any) -> None:
    r = sim("0.34.0", "sm121", DSV4, plugin=True)
    assert r.ok, _detail(r)
    assert r.plugin is not None
    # the experts follow the decision: no warning of the MoE path (the router's own fallback, from
    # the decision's cuBLAS to the plain linear vLLM enables for this FP32 gate, is said apart)
    assert not [w for w in r.plugin["warnings"] if "router" not in w and "GateLinear" not in w], r.plugin["warnings"]
    assert "moe.mxfp4:select_deepseek_v4_mxfp4_moe_backend" in r.plugin["patched"]
    (decision,) = r.plugin["decisions"]
    assert decision["paths"]["moe"]["backend"] == "marlin"
    assert decision["paths"]["moe"]["rule"] == "deep_gemm-mxfp4-gb10-scale-packing"
    assert r.moe is not None and r.moe.via == _ORACLE
    assert r.moe.backend == "MARLIN" and r.moe.experts == "MarlinExperts"
    assert r.backends()["moe"] == "marlin"
