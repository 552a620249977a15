"""Format variants as facts (issue #35): per-token vs per-tensor NVFP4 activations decide the
tile-192 window, vLLM 0.34's FP8-to-MXFP4 expert requantisation is read from its variables."""

from __future__ import annotations

import json

import pytest

from kernelpolicy.cli import main

_NVFP4_B200 = [
    "explain",
    "--gpu",
    "B200",
    "--engine",
    "sglang==0.5.18",
    "--fact",
    "model.type=qwen3_5_moe_text",
    "--fact",
    "model.is_moe=true",
    "--fact",
    "quant.scheme=nvfp4",
    "--fact",
    "quant.moe_scheme=nvfp4",
    "--fact",
    "host.machine=x86_64",
    "--fact",
    "flashinfer.version=0.6.17",
    "--no-env",
    "--json",
]


@pytest.mark.parametrize(
    ("extra", "denied"),
    [
        # the audit's case: a ModelOpt NVFP4 checkpoint (one calibrated input scale per tensor)
        (
            [
                "--fact",
                "quant.moe_activation_scale=per_tensor",
                "--env",
                "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION=0",
            ],
            False,
        ),
        (
            [
                "--fact",
                "quant.moe_activation_scale=per_tensor",
                "--env",
                "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION=1",
            ],
            True,
        ),
        (
            [
                "--fact",
                "quant.moe_activation_scale=per_tensor",
                "--env",
                "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION=true",
            ],
            True,
        ),
        (["--fact", "quant.moe_activation_scale=per_token"], True),
        # SGLang's switch unknown, the checkpoint per tensor: an accuracy rule on an unknown does not apply
        (["--fact", "quant.moe_activation_scale=per_tensor"], False),
    ],
)
def test_tile_192_is_denied_for_per_token_nvfp4_only(
    capsys: pytest.CaptureFixture[str], extra: list[str], denied: bool
) -> None:
    assert main([*_NVFP4_B200, *extra]) == 0
    d = json.loads(capsys.readouterr().out)
    rejected = {r for c in d["paths"]["moe"]["candidates"] if c["verdict"] == "rejected" for r in c.get("rules", [])}
    assert ("flashinfer_trtllm-nvfp4-moe-tile192-nan" in rejected) is denied
    assert (d["paths"]["moe"]["backend"] == "flashinfer_trtllm") is not denied


@pytest.mark.parametrize(
    ("engine", "env", "want"),
    [
        ("vllm==0.34.0", ["VLLM_FP8_MOE_REQUANT=mxfp4", "VLLM_FP8_MOE_REQUANT_ACT=a16w4"], ("mxfp4", "a16w4")),
        ("vllm==0.34.0", ["VLLM_FP8_MOE_REQUANT=MXFP4"], ("mxfp4", None)),
        ("vllm==0.34.0", ["VLLM_FP8_MOE_REQUANT=none"], ("none", None)),
        ("vllm==0.33.0", ["VLLM_FP8_MOE_REQUANT=mxfp4"], (None, None)),  # the variable is new in 0.34
    ],
)
def test_vllm_fp8_moe_requant_is_a_fact(
    capsys: pytest.CaptureFixture[str], engine: str, env: list[str], want: tuple[str | None, str | None]
) -> None:
    args = ["explain", "--gpu", "H200", "--model", "deepseek-ai/DeepSeek-V3", "--engine", engine, "--no-env", "--json"]
    for e in env:
        args += ["--env", e]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["facts"].get("quant.moe_requant"), d["facts"].get("quant.moe_requant_act")) == want
    # read on ROCm only: on an NVIDIA GPU the experts stay block FP8 and are decided as such
    assert d["facts"]["quant.moe_scheme"] == "fp8_block"


def test_per_token_nvfp4_experts_off_datacenter_blackwell_have_no_backend_in_vllm_034(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["explain", "--engine", "vllm==0.34.0", "--model-type", "qwen3_moe", "--quant", "nvfp4", "--no-env"]
    base += ["--fact", "model.is_moe=true", "--fact", "model.num_experts=128"]
    # per-token NVFP4 activations go to FlashInfer's TRT-LLM or CuTe DSL MoE only: none on Hopper
    assert main([*base, "--gpu", "H100", "--fact", "quant.moe_activation_scale=per_token"]) == 3
    out = capsys.readouterr()
    assert "vllm-nvfp4-per-token-moe-needs-flashinfer" in out.out + out.err
    # per-tensor scales (or vLLM 0.33, which has no per-token NVFP4 MoE) keep Marlin
    assert main([*base, "--gpu", "H100", "--fact", "quant.moe_activation_scale=per_tensor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["paths"]["moe"]["backend"] == "marlin"
    assert main([*base, "--gpu", "H100", "--json"]) == 0  # the scale unknown: assumed per tensor, listed
    d = json.loads(capsys.readouterr().out)
    assert d["paths"]["moe"]["backend"] == "marlin"
    assert any(a["fact"] == "quant.moe_activation_scale" for a in d["assumptions"])
