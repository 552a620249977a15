"""The "without the plugin" line is the user's own launch line with the decision's settings
(issue #36).

Found as: from `vllm serve MODEL --tensor-parallel-size 8 --enable-expert-parallel
--kv-cache-dtype fp8`, explain printed `vllm serve MODEL --moe-backend deep_gemm`: a one-GPU
launch of a model whose decision depended on TP and EP. The line printed now keeps every word of
the user's line, sets the decision's variables and flags in it (replacing a value the user gave),
and where the line is another engine's, labels the settings "add these".
"""

from __future__ import annotations

import re
import shlex

import pytest

from kernelpolicy.cli import main

SERVE = ["vllm", "serve", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8", "--enable-expert-parallel"]
SERVE += ["--kv-cache-dtype", "fp8", "--port", "8000"]


def _line(capsys: pytest.CaptureFixture[str], argv: list[str], label: str, code: int = 0) -> str:
    """The command printed under *label*, its continued lines joined as the shell reads them."""
    assert main(argv) == code
    out = re.sub(r" \\\n +", " ", capsys.readouterr().out)
    lines = out.splitlines()
    return lines[lines.index(label) + 1].strip()


def test_the_users_flags_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    line = _line(
        capsys, ["explain", "--no-env", "--gpu", "H200", "--", *SERVE], "vLLM without the plugin, where flags can:"
    )
    words = shlex.split(line)
    assert words[: words.index("vllm")] == ["VLLM_MOE_USE_DEEP_GEMM=0"]
    # the FP8 cache moves Hopper MLA off FlashMLA (flashmla-fp8-kv-multiturn-garbage): vLLM is told
    assert words[words.index("vllm") :] == [
        *SERVE,
        "--moe-backend",
        "flashinfer_cutlass",
        "--attention-backend",
        "TRITON_MLA",
    ]


def test_full_level_keeps_them_too(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "--no-env", "--gpu", "H200", "--explain=full", "--", *SERVE]
    line = _line(capsys, argv, "on vLLM without the plugin, where flags can:")
    assert line == (
        "VLLM_MOE_USE_DEEP_GEMM=0 "
        + " ".join(SERVE)
        + " --moe-backend flashinfer_cutlass --attention-backend TRITON_MLA"
    )


def test_a_refused_choice_on_the_line_is_replaced_not_repeated(capsys: pytest.CaptureFixture[str]) -> None:
    serve = ["vllm", "serve", "Qwen/Qwen3.6-35B-A3B-FP8", "-tp", "2", "--moe-backend=deep_gemm"]
    argv = ["explain", "--no-env", "--gpu", "sm121", "--", "VLLM_LOGGING_LEVEL=DEBUG", *serve]
    line = _line(capsys, argv, "vLLM without the plugin, where flags can:", code=5)
    assert shlex.split(line) == [
        "VLLM_LOGGING_LEVEL=DEBUG",
        "VLLM_USE_DEEP_GEMM=0",
        "vllm",
        "serve",
        "Qwen/Qwen3.6-35B-A3B-FP8",
        "-tp",
        "2",
        "--moe-backend=triton",
    ]


def test_vllm_flags_given_as_options_are_on_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "--no-env", "--gpu", "H200", "--model", "deepseek-ai/DeepSeek-V3", "-tp", "8"]
    line = _line(capsys, [*argv, "--kv-cache-dtype", "fp8"], "vLLM without the plugin, where flags can:")
    assert line.endswith(
        "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --kv-cache-dtype fp8 --moe-backend triton"
        " --attention-backend TRITON_MLA"
    )


def test_an_option_and_a_serve_line_together(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "--no-env", "--gpu", "H200", "-tp", "8", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3"]
    line = _line(capsys, [*argv, "--enable-expert-parallel"], "vLLM without the plugin, where flags can:")
    assert "vllm serve deepseek-ai/DeepSeek-V3 --enable-expert-parallel --tensor-parallel-size 8 --moe-backend" in line


def test_an_sglang_line_is_printed_back_and_no_vllm_line_beside_it(capsys: pytest.CaptureFixture[str]) -> None:
    """From an SGLang line, the SGLang line is the user's, with the SGLang decision's flags; no
    vLLM line is built from a decision of another engine (its flags are the SGLang decision's)."""
    sglang = ["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp-size", "8"]
    argv = ["explain", "--no-env", "--gpu", "B200", "--explain=full", "--", *sglang]
    assert main(argv) == 0
    out = capsys.readouterr().out
    at = out.index("on SGLang without the plugin, where flags can:\n")
    assert " ".join(sglang) in out[at:].splitlines()[1]
    assert "on vLLM without the plugin" not in out and "vllm serve" not in out


def test_without_a_line_the_generic_one_stays(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "--no-env", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"]
    line = _line(capsys, argv, "vLLM without the plugin, where flags can:")
    assert line == "VLLM_USE_DEEP_GEMM=0 vllm serve Qwen/Qwen3.6-35B-A3B-FP8 --moe-backend triton"
