"""Hostile input, round three (N8): an operator file cannot silently shadow a shipped catalog.

A GPU alias, a catalog model id or an engine's name table defined again is an error naming both
files, as a duplicate rule id is: `GB10` cannot be made to mean an sm90 part, `cutlass` cannot
be made to mean `deep_gemm`."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import cli, one_error_line

CASES = {
    "gpu alias": "gpus:\n  - {name: Evil GPU, aliases: [GB10], sm: sm90, source: x}\n",
    "gpu alias, other case": "gpus:\n  - {name: Evil GPU, aliases: ['gb10'], sm: sm90, source: x}\n",
    "gpu name": "gpus:\n  - {name: NVIDIA GB10, sm: sm90, source: x}\n",
    "model id": (
        "models:\n  - id: deepseek-ai/DeepSeek-V3\n    source: x\n"
        "    config: {model_type: llama, architectures: [LlamaForCausalLM], hidden_size: 4096}\n"
    ),
    "engine": "engine:\n  name: vllm\n  aliases: {moe: {cutlass: deep_gemm}}\n",
}


@pytest.mark.parametrize("name", list(CASES))
def test_redefining_a_catalog_entry_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    f = tmp_path / "op.yaml"
    f.write_text(CASES[name], encoding="utf-8")
    code, out, err = cli(
        capsys, "explain", "--gpu", "GB10", "--model", "deepseek-ai/DeepSeek-V3", "--moe-backend", "cutlass",
        "--no-env", "--policy", str(f),
    )  # fmt: skip
    assert code == 2, out
    line = one_error_line(err)
    assert "duplicate" in line and "op.yaml" in line and "first in" in line


def test_a_new_gpu_and_model_are_still_welcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "op.yaml"
    f.write_text("gpus:\n  - {name: Lab Part X1, aliases: [LPX1], sm: sm90, source: lab}\n", encoding="utf-8")
    code, out, err = cli(
        capsys, "explain", "--gpu", "LPX1", "--model", "deepseek-ai/DeepSeek-V3", "--no-env", "--policy", str(f)
    )
    assert code in (0, 3), err
    assert "Lab Part X1" in out
