"""The attention path (issue #39): its facts from config.json and the serve line, its catalog,
its decision, as a user reaches them through the command line."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from kernelpolicy.cli import main
from kernelpolicy.facts.quant import ModelConfigError, config_facts


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


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


# -- through the command line: one case per row


@dataclass(frozen=True)
class Case:
    """``explain --gpu GPU`` of a launch line (or ``--model``), and what it must print."""

    id: str
    gpu: str
    line: str  #: the launch line after ``--``, or ``--model ID``
    code: int = 0
    facts: dict[str, Any] = field(default_factory=dict)  #: in ``--json``
    sources: dict[str, str] = field(default_factory=dict)  #: in ``--json``
    backend: str | tuple[str, ...] | None = None  #: the attention path's backend, or one of these
    explicit: str | None = None  #: the attention path's ``explicit``
    args_end: tuple[str, ...] | None = None  #: the end of the rendered vLLM line's args
    args_lack: str | None = None  #: a flag the rendered vLLM line must not carry
    out: tuple[str, ...] = ()  #: in the text output
    err: tuple[str, ...] = ()  #: in the text run's stderr
    one_line_error: bool = False


VLLM = "vllm serve"
SGLANG = "python -m sglang.launch_server --model-path"
CASES = [
    Case(
        "vllm attention flags are facts",
        "H100",
        f"{VLLM} Qwen/Qwen3-32B-FP8 --attention-backend FLASHINFER --block-size 32",
        facts={"deploy.attention_backend": "flashinfer", "deploy.block_size": 32},
        backend="flashinfer",
        explicit="--attention-backend flashinfer",
    ),
    # FlashInfer over an FP8 cache on Hopper does not compile (vllm#27604): asked for, it is
    # refused (exit 5) and the path runs the next valid backend
    Case(
        "an explicit backend a crash rule blocks is refused",
        "H100",
        f"{VLLM} Qwen/Qwen3-32B-FP8 --attention-backend FLASHINFER --kv-cache-dtype fp8",
        code=5,
        out=("attention triton_attn   (`--attention-backend flashinfer` REFUSED)",),
        err=("(attention: flashinfer-attn-fp8-kv-hopper-jit)",),
    ),
    Case(
        "a vllm mla backend name is its family",
        "H100",
        f"{VLLM} deepseek-ai/DeepSeek-V3 --attention-backend FLASH_ATTN_MLA",
        facts={"deploy.attention_backend": "flash_attn"},
        backend="flash_attn",
    ),
    Case(
        "an unknown attention backend is one line",
        "H100",
        f"{VLLM} Qwen/Qwen3-32B-FP8 --attention-backend FLASHINFERR",
        code=2,
        err=("`flashinferr` is not an attention backend", "did you mean `flashinfer`"),
        one_line_error=True,
    ),
    Case(
        "a bad block size is refused",
        "H100",
        f"{VLLM} Qwen/Qwen3-32B-FP8 --block-size 0",
        code=2,
        err=("--block-size `0`: expected a positive size",),
        one_line_error=True,
    ),
    Case(
        "sglang attention flags are facts",
        "H100",
        f"{SGLANG} Qwen/Qwen3-32B-FP8 --attention-backend fa3 --page-size 64",
        facts={"deploy.attention_backend": "flash_attn", "deploy.block_size": 64},
        backend="flash_attn",
    ),
    Case("every decision has the attention path", "sm121", "--model Qwen/Qwen3.6-35B-A3B-FP8", out=("attention ",)),
    # its catalog config omits MLA; vLLM runs FLASHINFER_MLA on sm100
    Case(
        "an mla model's catalog config without mla fields",
        "B200",
        "--model deepseek-ai/DeepSeek-V3.1",
        facts={"model.mla": True},
        sources={"model.mla": "implied:mla-model-types"},
        backend="flashinfer",
    ),
    Case(
        "a sparse mla model runs a sparse kernel",
        "H100",
        "--model deepseek-ai/DeepSeek-V3.2-Exp",
        backend=("flashmla_sparse", "flashinfer_mla_sparse"),
    ),
    Case(
        "no mla kernel reads an e5m2 cache",
        "H100",
        f"{VLLM} deepseek-ai/DeepSeek-V3 --kv-cache-dtype fp8_e5m2",
        code=3,
        out=("attention-mla-kv-cache-dtype",),
    ),
    # the vLLM line names the attention backend only where a rule moved it
    Case(
        "a rule moved it: the vllm line names it",
        "H100",
        f"{VLLM} Qwen/Qwen3-32B-FP8 --kv-cache-dtype fp8",
        backend="triton_attn",
        args_end=("--attention-backend", "TRITON_ATTN"),
    ),
    Case(
        "vllm picks it itself: the line leaves it out",
        "H100",
        f"{VLLM} Qwen/Qwen3-32B-FP8",
        backend="flash_attn",
        args_lack="--attention-backend",
    ),
    # FlashMLA's sparse kernel runs V3.2 on B200: the choice stands and stays in the user's line
    Case(
        "an explicit attention backend that stands stays in the user's line",
        "B200",
        f"{VLLM} deepseek-ai/DeepSeek-V3.2-Exp --kv-cache-dtype fp8 --attention-backend FLASHMLA_SPARSE",
        out=("--attention-backend FLASHMLA_SPARSE",),
    ),
]


def _argv(case: Case, *options: str) -> list[str]:
    line = case.line.split()
    return ["explain", "--no-env", "--gpu", case.gpu, *options, *(line if line[0] == "--model" else ["--", *line])]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id.replace(" ", "-"))
def test_attention_through_the_command_line(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *_argv(case))
    assert code == case.code, err
    flat = out.replace("\\\n   ", "").replace("  ", " ")
    for text in case.out:
        assert text in out or text in flat, out
    for text in case.err:
        assert text in err
    if case.one_line_error:
        assert out == "" and err.count("\n") == 1
    if code == 2:
        return
    code, out, err = run(capsys, *_argv(case, "--json"))
    assert code == case.code, err
    d = json.loads(out)
    for key, value in case.facts.items():
        assert d["facts"][key] == value, key
    for key, source in case.sources.items():
        assert d["sources"][key] == source, key
    attention = d["paths"]["attention"]
    if isinstance(case.backend, tuple):
        assert attention["backend"] in case.backend
    elif case.backend is not None:
        assert attention["backend"] == case.backend
    if case.explicit is not None:
        assert attention["explicit"] == case.explicit
    if case.args_end is not None:
        assert tuple(d["engine"]["vllm"]["args"][-len(case.args_end) :]) == case.args_end
    if case.args_lack is not None:
        assert case.args_lack not in d["engine"]["vllm"]["args"]
