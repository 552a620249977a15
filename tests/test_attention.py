"""The attention path (issue #39): its facts from config.json and the serve line, its catalog,
its decision, as a user reaches them through the command line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernelpolicy.cli import main
from kernelpolicy.facts.quant import ModelConfigError, config_facts


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def decide(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    cut = argv.index("--") if "--" in argv else len(argv)  # what follows `--` is the serve line
    code, out, err = run(capsys, "explain", "--no-env", "--json", *argv[:cut], *argv[cut:])
    assert code in (0, 3, 5), err
    return json.loads(out)  # type: ignore[no-any-return]


# -- facts from config.json


def test_mla_head_size_is_the_latent_plus_the_rotary_dims() -> None:
    facts = config_facts(
        {
            "model_type": "deepseek_v3",
            "hidden_size": 7168,
            "num_attention_heads": 128,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "head_dim": 192,  # vLLM's MLA kernels see the latent, not this
        }
    )
    assert facts["model.mla"] is True and facts["model.head_size"] == 576
    assert facts["model.kv_lora_rank"] == 512 and facts["model.qk_rope_head_dim"] == 64
    assert facts["model.sparse_attention"] is False
    sparse = config_facts(
        {"model_type": "deepseek_v32", "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 2048}
    )
    assert sparse["model.sparse_attention"] is True


def test_head_size_from_head_dim_else_hidden_over_heads() -> None:
    assert config_facts({"hidden_size": 4096, "num_attention_heads": 32, "head_dim": 256})["model.head_size"] == 256
    plain = config_facts({"hidden_size": 4096, "num_attention_heads": 32})
    assert plain["model.head_size"] == 128 and plain["model.mla"] is False
    # a config that says nothing of its attention does not say "no MLA" (the catalog's abbreviated ones)
    assert "model.mla" not in config_facts({"model_type": "deepseek_v3", "hidden_size": 7168})


def test_a_window_written_but_not_used_is_no_sliding_window() -> None:
    qwen = {"hidden_size": 4096, "num_attention_heads": 32, "sliding_window": 131072, "use_sliding_window": False}
    assert config_facts(qwen)["model.sliding_window"] is False
    gemma = {"hidden_size": 4096, "num_attention_heads": 32, "layer_types": ["sliding_attention", "full_attention"]}
    assert config_facts(gemma)["model.sliding_window"] is True
    assert config_facts({"sliding_window": 4096})["model.sliding_window"] is True


def test_a_bad_attention_size_names_the_field() -> None:
    with pytest.raises(ModelConfigError, match="kv_lora_rank"):
        config_facts({"kv_lora_rank": 0})


# -- facts from the serve line


def test_vllm_attention_flags_are_facts(capsys: pytest.CaptureFixture[str]) -> None:
    d = decide(
        capsys,
        "--gpu",
        "H100",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-32B-FP8",
        "--attention-backend",
        "FLASHINFER",
        "--block-size",
        "32",
    )
    assert d["facts"]["deploy.attention_backend"] == "flashinfer" and d["facts"]["deploy.block_size"] == 32
    attention = d["paths"]["attention"]
    assert attention["backend"] == "flashinfer" and attention["explicit"] == "--attention-backend flashinfer"


def test_an_explicit_backend_a_crash_rule_blocks_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """FlashInfer over an FP8 cache on Hopper does not compile (vllm#27604): asked for, it is
    refused (exit 5) and the path runs the next valid backend."""
    code, out, err = run(
        capsys,
        "explain",
        "--no-env",
        "--gpu",
        "H100",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-32B-FP8",
        "--attention-backend",
        "FLASHINFER",
        "--kv-cache-dtype",
        "fp8",
    )
    assert code == 5
    assert "attention triton_attn   (`--attention-backend flashinfer` REFUSED)" in out
    assert "(attention: flashinfer-attn-fp8-kv-hopper-jit)" in err


def test_a_vllm_mla_backend_name_is_its_family(capsys: pytest.CaptureFixture[str]) -> None:
    d = decide(
        capsys,
        "--gpu",
        "H100",
        "--",
        "vllm",
        "serve",
        "deepseek-ai/DeepSeek-V3",
        "--attention-backend",
        "FLASH_ATTN_MLA",
    )
    assert d["facts"]["deploy.attention_backend"] == "flash_attn"
    assert d["paths"]["attention"]["backend"] == "flash_attn"


def test_an_unknown_attention_backend_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys,
        "explain",
        "--no-env",
        "--gpu",
        "H100",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-32B-FP8",
        "--attention-backend",
        "FLASHINFERR",
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "`flashinferr` is not an attention backend" in err
    assert "did you mean `flashinfer`" in err


def test_a_bad_block_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "explain", "--no-env", "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-32B-FP8", "--block-size", "0"
    )
    assert code == 2 and "--block-size `0`: expected a positive size" in err


def test_sglang_attention_flags_are_facts(capsys: pytest.CaptureFixture[str]) -> None:
    d = decide(
        capsys,
        "--gpu",
        "H100",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-32B-FP8",
        "--attention-backend",
        "fa3",
        "--page-size",
        "64",
    )
    assert d["facts"]["deploy.attention_backend"] == "flash_attn" and d["facts"]["deploy.block_size"] == 64
    assert d["paths"]["attention"]["backend"] == "flash_attn"


# -- the decision


def test_every_decision_has_the_attention_path(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "explain", "--no-env", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--summary"
    )
    assert code == 0 and " attention=" in out
    d = decide(capsys, "--gpu", "B200", "--model", "deepseek-ai/DeepSeek-V3.1")  # its catalog config omits MLA
    assert d["facts"]["model.mla"] is True and d["sources"]["model.mla"] == "implied:mla-model-types"
    assert d["paths"]["attention"]["backend"] == "flashinfer"  # vLLM's FLASHINFER_MLA on sm100


def test_a_sparse_mla_model_runs_a_sparse_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    d = decide(capsys, "--gpu", "H100", "--model", "deepseek-ai/DeepSeek-V3.2-Exp")
    assert d["paths"]["attention"]["backend"] in ("flashmla_sparse", "flashinfer_mla_sparse")


def test_no_mla_kernel_reads_an_e5m2_cache(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "explain",
        "--no-env",
        "--gpu",
        "H100",
        "--",
        "vllm",
        "serve",
        "deepseek-ai/DeepSeek-V3",
        "--kv-cache-dtype",
        "fp8_e5m2",
    )
    assert code == 3
    assert "attention-mla-kv-cache-dtype" in out


# -- the engine line


def test_the_vllm_line_names_the_attention_backend_only_where_a_rule_moved_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = decide(capsys, "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-32B-FP8", "--kv-cache-dtype", "fp8")
    assert d["paths"]["attention"]["backend"] == "triton_attn"
    assert d["engine"]["vllm"]["args"][-2:] == ["--attention-backend", "TRITON_ATTN"]
    plain = decide(capsys, "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-32B-FP8")
    assert plain["paths"]["attention"]["backend"] == "flash_attn"
    assert "--attention-backend" not in plain["engine"]["vllm"]["args"]  # vLLM picks it itself


def test_an_explicit_attention_backend_that_stands_stays_in_the_users_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "explain",
        "--no-env",
        "--gpu",
        "B200",
        "--",
        "vllm",
        "serve",
        "deepseek-ai/DeepSeek-V3.2-Exp",
        "--kv-cache-dtype",
        "fp8",
        "--attention-backend",
        "FLASHMLA_SPARSE",
    )
    assert code == 0, out  # FlashMLA's sparse kernel runs V3.2 on B200: the choice stands
    assert "--attention-backend FLASHMLA_SPARSE" in out.replace("\\\n   ", "").replace("  ", " ")
