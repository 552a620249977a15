"""vLLM serve lines in the spellings vLLM's own parser accepts, through the release itself.

``releases/vllm/options.json`` (what ``explain`` reads abbreviations against) must be each
release's own parser's option strings; and lines spelled as operators write them (an
abbreviation, ``--flag=value``, ``_`` for ``-``, the short names) must give the plugin, reading
the ``VllmConfig`` vLLM builds from the line, the facts and fingerprint ``explain`` gives for the
same line. tests/models/test_vllm_spellings.py walks every prefix against the scanned options.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.cli import main
from kernelpolicy.engines.vllm.testing import parser_options, plugin_facts
from kernelpolicy.releases.vllm.options import launch_options

pytestmark = pytest.mark.vllm

MODEL = "Qwen/Qwen3-30B-A3B-FP8"
GPU, CC, GPU_NAME = "H100", (9, 0), "NVIDIA H100"
#: lines as operators write them: abbreviations, `=`, underscores, short names (with the batch
#: budget named: vLLM's default depends on the GPU's memory)
LINES = (
    ["--tensor-parallel", "2", "--max-num-batched-tokens", "8192"],
    ["--tensor_parallel_size=2", "--max_num_batched_tokens=8192"],
    ["-tp=2", "--max-num-batched", "8192"],
    ["--enable-lora", "--max-num-batched-tokens=16K"],
    ["--kv-cache-dtype=fp8", "--enforce-eager", "--max-num-batched-tokens", "8192"],
    ["--max-num-batched-tokens", "8192", "--data-parallel-size=2", "--enable-expert-parallel", "-tp", "2"],
)


def test_the_scanned_options_are_the_releases_own(release: str, venv: Any) -> None:
    assert dict(launch_options()[release]) == parser_options(venv(release))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, catalog: Any) -> Path:
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_text(json.dumps(catalog(MODEL)), encoding="utf-8")
    return folder


def test_spelled_lines_read_alike_in_vllm_and_explain(
    release: str, venv: Any, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = plugin_facts(
        venv(release),
        CC,
        [["--model", str(model_dir), "--skip-tokenizer-init", *line] for line in LINES],
        gpu_name=GPU_NAME,
    )
    for line, cell in zip(LINES, cells, strict=True):
        assert not cell["errors"], (line, cell["errors"])
        given = [a for k, v in sorted(cell["machine"].items()) for a in ("--fact", f"{k}={v}")]
        argv = ["explain", "--gpu", GPU, "--json", "--no-env", "--engine", f"vllm=={release}", *given]
        code = main([*argv, "--", "vllm", "serve", str(model_dir), *line])
        out = capsys.readouterr()
        assert code in (0, 3, 5), out.err
        ours = json.loads(out.out)
        differ = {
            k: (cell["facts"].get(k), ours["facts"].get(k))
            for k in sorted(set(cell["facts"]) | set(ours["facts"]))
            if cell["facts"].get(k) != ours["facts"].get(k)
        }
        assert differ == {}, line
        assert cell["fingerprint"] == ours["fingerprint"], line
