"""Layer shapes per rank, from the catalog's configs, under TP and EP (vLLM's sharding)."""

from __future__ import annotations

from typing import Any

import pytest

from kernelpolicy.bench import layer_shapes
from kernelpolicy.dsl.loader import load_policy
from kernelpolicy.errors import UsageError
from kernelpolicy.facts.model import locate_model


def _config(model: str) -> Any:
    return locate_model(model, load_policy([]).models).config


def _shapes(model: str, tp: int = 1, ep: int = 1) -> dict[str, tuple[int, int, int]]:
    return {x.name: (x.experts, x.n, x.k) for x in layer_shapes(_config(model), model=model, tp=tp, ep=ep)}


def _moe(model: str, tp: int = 1, ep: int = 1) -> tuple[int, int, int, int, int]:
    (x,) = [x for x in layer_shapes(_config(model), model=model, tp=tp, ep=ep) if x.path == "moe"]
    return x.experts, x.n, x.k, x.topk, x.total_experts


def test_deepseek_v3_tp1_mla_dense_and_shared_experts() -> None:
    s = _shapes("deepseek-ai/DeepSeek-V3")
    assert s["fused_qkv_a_proj"] == (1, 1536 + 512 + 64, 7168)  # q_lora + kv_lora + rope, replicated
    assert s["q_b_proj"] == (1, 128 * (128 + 64), 1536)
    assert s["kv_b_proj"] == (1, 128 * (128 + 128), 512)
    assert s["o_proj"] == (1, 7168, 128 * 128)
    assert s["mlp.gate_up_proj"] == (1, 2 * 18432, 7168)  # the first three dense layers
    assert s["mlp.down_proj"] == (1, 7168, 18432)
    assert s["shared_experts.gate_up_proj"] == (1, 2 * 2048, 7168)
    assert s["shared_experts.down_proj"] == (1, 7168, 2048)
    # one MoE layer: w13 (2I x H) then w2 (H x I) of 256 experts, each token routed to 8
    assert s["experts"] == (256, 2 * 2048, 7168) and _moe("deepseek-ai/DeepSeek-V3") == (256, 4096, 7168, 8, 256)
    assert s["gate"] == (1, 256, 7168)


def test_deepseek_v3_tp8_splits_columns_and_rows_but_not_the_replicated_layers() -> None:
    s = _shapes("deepseek-ai/DeepSeek-V3", tp=8)
    assert s["fused_qkv_a_proj"] == (1, 2112, 7168)
    assert s["q_b_proj"] == (1, 16 * 192, 1536) and s["kv_b_proj"] == (1, 16 * 256, 512)
    assert s["o_proj"] == (1, 7168, 16 * 128)
    assert s["mlp.gate_up_proj"] == (1, 4608, 7168) and s["mlp.down_proj"] == (1, 7168, 2304)
    assert s["experts"] == (256, 512, 7168)  # TP splits each expert: I = 2048 / 8 (w2: 7168 x 256)
    assert s["gate"] == (1, 256, 7168)


def test_deepseek_v3_ep8_splits_the_experts_not_their_width() -> None:
    s = _shapes("deepseek-ai/DeepSeek-V3", tp=8, ep=8)
    assert _moe("deepseek-ai/DeepSeek-V3", tp=8, ep=8) == (32, 4096, 7168, 8, 256)  # 32 of 256, routed over all
    assert s["shared_experts.gate_up_proj"] == (1, 512, 7168)  # shared experts stay TP-sharded


def test_qwen3_dense_and_moe_attention_with_gqa() -> None:
    assert _shapes("Qwen/Qwen3-32B-FP8") == {
        "qkv_proj": (1, (64 + 2 * 8) * 128, 5120),
        "o_proj": (1, 5120, 64 * 128),
        "mlp.gate_up_proj": (1, 2 * 25600, 5120),
        "mlp.down_proj": (1, 5120, 25600),
    }
    s = _shapes("Qwen/Qwen3-32B-FP8", tp=4)
    assert s["qkv_proj"] == (1, (16 + 2 * 2) * 128, 5120) and s["mlp.down_proj"] == (1, 5120, 6400)
    moe = _shapes("Qwen/Qwen3-30B-A3B-FP8")
    assert "mlp.gate_up_proj" not in moe  # every MLP is MoE
    assert moe["qkv_proj"] == (1, (32 + 2 * 4) * 128, 2048) and moe["o_proj"] == (1, 2048, 4096)
    assert moe["experts"] == (128, 2 * 768, 2048) and moe["gate"] == (1, 128, 2048)
    assert _moe("Qwen/Qwen3-30B-A3B-FP8") == (128, 1536, 2048, 8, 128)
    ep = _shapes("Qwen/Qwen3-30B-A3B-FP8", tp=2, ep=2)
    assert ep["qkv_proj"] == (1, (16 + 2 * 2) * 128, 2048) and ep["experts"] == (64, 1536, 2048)


def test_kv_heads_fewer_than_ranks_are_replicated() -> None:
    s = _shapes("Qwen/Qwen3-30B-A3B-FP8", tp=8)  # 4 KV heads over 8 ranks: one per rank
    assert s["qkv_proj"] == (1, (4 + 2 * 1) * 128, 2048)


def test_missing_geometry_and_bad_splits_are_one_clear_error() -> None:
    with pytest.raises(UsageError, match="has no `num_attention_heads`"):
        layer_shapes({"hidden_size": 4096, "intermediate_size": 12288}, model="x/y")
    with pytest.raises(UsageError, match=r"num_attention_heads \(64\) does not split over 3 ranks"):
        layer_shapes(_config("Qwen/Qwen3-32B-FP8"), model="Qwen/Qwen3-32B-FP8", tp=3)
    with pytest.raises(UsageError, match="expected a positive integer"):
        layer_shapes({"hidden_size": "big", "num_attention_heads": 8}, model="x/y")
