"""The seed cases on real vLLM 0.26.0 and 0.34.0 from PyPI, on a simulated GPU."""

from __future__ import annotations

import json
import subprocess
import sys
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


def test_034_env_deep_gemm_diverges_natively(sim: Any) -> None:
    r = sim("0.34.0", "sm121", QWEN, env={"VLLM_USE_DEEP_GEMM": "1"})
    assert r.ok, _detail(r)
    assert r.dense is not None and r.dense.backend == "cutlass"
    assert r.moe is not None and r.moe.backend == "DEEPGEMM"
    assert r.divergences()


def test_034_env_deep_gemm_agrees_with_plugin(sim: Any) -> None:
    r = sim("0.34.0", "sm121", QWEN, env={"VLLM_USE_DEEP_GEMM": "1"}, plugin=True)
    assert r.ok, _detail(r)
    assert r.plugin is not None
    (decision,) = r.plugin["decisions"]
    assert r.backends()["dense"] == decision["paths"]["dense"]["backend"]
    assert r.backends()["moe"] == decision["paths"]["moe"]["backend"]
    assert r.divergences() == []


@pytest.mark.parametrize("version", ["0.26.0", "0.34.0"])
def test_sm120_gemma_without_sm120_deep_gemm_selects_cutlass(sim: Any, version: str) -> None:
    # 0.34.0 builds the catalog's gemma-4 config through transformers' Gemma4 config class; 0.26.0
    # cannot build any gemma-4 ModelConfig with the transformers pip gives it (GEMMA4_STAND_IN in
    # conftest), so there the text model is a Llama of gemma-4's width carrying gemma-4's
    # compressed-tensors FP8-block quantization_config: the dense selection only reads the quant
    # scheme, the layer shape and the platform.
    facts = {"deep_gemm.has_sm120_sf_layout": False}
    native = sim(version, "sm120", GEMMA)
    assert native.ok, _detail(native)
    assert native.dense is not None and native.dense.backend == "deep_gemm", "natively DeepGEMM: the #47130 crash"
    if version == "0.34.0":
        assert native.model_type == "gemma4_text"
    r = sim(version, "sm120", GEMMA, plugin=True, facts=facts)
    assert r.ok, _detail(r)
    assert r.dense is not None and r.dense.kernel == "CutlassFp8BlockScaledMMKernel"
    assert r.warmup is not None and not r.warmup.dense


@pytest.mark.parametrize("version", ["0.26.0", "0.34.0"])
def test_router_never_bf16x3_on_sm121(sim: Any, version: str) -> None:
    r = sim(version, "sm121", QWEN, plugin=True)
    assert r.router is not None, _detail(r)
    assert not r.router.flags.get("allow_bf16x3_router_gemm")
    assert r.router.backend != "bf16x3"


def _engine_vllm(*argv: str) -> dict[str, Any]:
    """``engine.vllm`` of ``kernelpolicy explain --json`` (the real command line)."""
    proc = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", "explain", *argv, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    engine: dict[str, Any] = json.loads(proc.stdout)["engine"]["vllm"]
    return engine


def test_026_engine_flags_on_unpatched_vllm_match_the_plugin(sim: Any) -> None:
    flags = _engine_vllm("--gpu", "sm121", "--model", QWEN, "--engine", "vllm==0.26.0")
    args = list(flags["args"])
    assert args[:1] == ["--moe-backend"] and len(args) == 2, f"only --moe-backend is simulated: {args}"
    unpatched = sim("0.26.0", "sm121", QWEN, env=dict(flags["env"]), moe_backend=args[1])
    assert unpatched.ok, _detail(unpatched)
    assert unpatched.plugin is None, "no plugin in that process"
    patched = sim("0.26.0", "sm121", QWEN, plugin=True)
    assert patched.plugin is not None
    (decision,) = patched.plugin["decisions"]
    got = unpatched.backends()
    assert got["dense"] == decision["paths"]["dense"]["backend"] == "cutlass"
    assert got["moe"] == decision["paths"]["moe"]["backend"] == "triton"
    assert got["warmup"] == ",".join(decision["warmup"]) == ""
    assert unpatched.divergences() == []


def test_034_sm90_fp32_gate_runs_bf16x3_with_the_plugin(sim: Any) -> None:
    """vLLM 0.34 runs BF16x3 for an FP32 gate on Hopper; the decision used to rank a BF16 tier
    there and the plugin, clearing every other tier, left the gate on F.linear in FP32 (the 0.34
    sweep: gpt-oss and Qwen3.5-397B on sm90, `linear_fp32` with the plugin, `bf16x3` without)."""
    facts = {"model.router_dtype": "float32"}
    native = sim("0.34.0", "sm90", "openai/gpt-oss-120b", router_dtype="float32")
    assert native.router is not None and native.router.backend == "bf16x3", _detail(native)
    r = sim("0.34.0", "sm90", "openai/gpt-oss-120b", router_dtype="float32", plugin=True, facts=facts)
    assert r.router is not None and r.router.backend == "bf16x3", _detail(r)
    assert r.plugin is not None and not r.plugin["fallbacks"], r.plugin


@pytest.mark.parametrize(
    ("model", "native", "scheme"),
    [
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "MacheteLinearKernel", "w4a16"),
        ("moonshotai/Kimi-K2-Thinking", "HummingLinearKernel", "w4a16"),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", "HummingNvFp4LinearKernel", "nvfp4"),
    ],
)
def test_034_sm90_weight_only_and_nvfp4_linears_run_the_decision(
    sim: Any, model: str, native: str, scheme: str
) -> None:
    """The probe asked vLLM's FP8 tables about GPTQ, WNA16 and NVFP4 checkpoints (their `vLLM
    alone` column was an FP8 kernel), and no wrapper reached vLLM's weight-only and NVFP4 kernel
    choices: on sm90 vLLM 0.34 runs Machete or Humming (Humming ahead of Marlin there) where the
    decision is Marlin. The probe now asks the selector vLLM calls, and the plugin holds Marlin."""
    alone = sim("0.34.0", "sm90", model)
    assert alone.dense is not None and (alone.dense.kernel, alone.dense.scheme) == (native, scheme), _detail(alone)
    r = sim("0.34.0", "sm90", model, plugin=True)
    assert r.dense is not None and r.dense.backend == "marlin", _detail(r)
    assert r.plugin is not None and r.plugin["decisions"], r.plugin
    assert not [f for f in r.plugin["fallbacks"] if f["path"] == "dense"], r.plugin["fallbacks"]


@pytest.mark.parametrize(("gpu", "router"), [("sm90", "ll_bf16"), ("sm120", "linear_fp32")])
def test_034_nemotron_h_moe_runs_and_its_gate_computes_in_fp32(sim: Any, gpu: str, router: str) -> None:
    """The probe gave Nemotron-H's experts a gated relu2 (vLLM's model passes the non-gated
    `relu2_no_mul`), so every sweep cell stopped at "No FP8 MoE backend supports the deployment
    configuration"; and it built the gate without the model's force_fp32_compute."""
    r = sim("0.34.0", gpu, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", router_dtype="bfloat16")
    assert "moe" not in r.errors and r.moe is not None and r.moe.backend, _detail(r)
    assert r.router is not None and r.router.backend == router, _detail(r)
