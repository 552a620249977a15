"""`kernelpolicy bench --paths attention` (issue #39 part 2) without a GPU: the plan, the shapes,
and the measured report re-rendered as an operator would."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpolicy.bench.shapes import attention_layers
from kernelpolicy.cli import main

MEASURED = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "2026-12-05-attention-bench"


def test_plan_lists_decode_and_prefill_cells_in_the_deployments_cache_dtype(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "--plan", "--all", "--paths", "attention", "--gpu", "sm90"]
    assert main([*argv, "--", "vllm", "serve", "Qwen/Qwen3-32B-FP8", "--kv-cache-dtype", "fp8", "-tp", "2"]) == 0
    out = capsys.readouterr().out
    assert "attention decision triton_attn" in out
    assert "flash_attn (ruled out by flash_attn-fp8-kv-hopper-accuracy)" in out
    assert "attn.decode.32k (32q/4kv heads x 128, fp8 cache, context 32768)" in out
    assert "attn.prefill (32q/4kv heads x 128, fp8 cache)" in out


def test_a_cache_dtype_bench_cannot_hold_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--plan", "--paths", "attention", "--gpu", "sm90", "--model", "Qwen/Qwen3-32B-FP8"]
    assert main([*argv, "--kv-cache-dtype", "fp8_e5m2"]) == 2
    assert "--kv-cache-dtype `fp8_e5m2`: bench measures attention with a BF16 or FP8 (e4m3) cache" in (
        capsys.readouterr().err
    )


def test_mla_models_have_no_mha_cells_and_gqa_heads_split_by_tp() -> None:
    assert attention_layers({"num_attention_heads": 128, "kv_lora_rank": 512, "hidden_size": 7168}) == []
    layers = attention_layers({"num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128}, tp=16)
    assert {(x.n, x.kv_heads, x.k) for x in layers} == {(4, 1, 128)}
    assert [x.ms for x in layers if x.phase == "prefill"] == [(1024, 8192, 32768)]


@pytest.mark.parametrize("kv", ["auto", "fp8"])
def test_the_measured_reports_re_render_and_combine(kv: str, capsys: pytest.CaptureFixture[str]) -> None:
    p1, p2 = MEASURED / f"attn-{kv}.p1.json", MEASURED / f"attn-{kv}.p2.json"
    assert main(["bench", "--report", str(p1), "--report", str(p2)]) == 0
    out = capsys.readouterr().out
    assert "in each of 2 processes" in out and "attn.decode.32k (64q/8kv heads x 128" in out
    assert "failed in 0" in out
