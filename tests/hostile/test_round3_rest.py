"""Hostile input, round three, what was left: N17's silent acceptances, N18's messages, D8's
fact sources (each test fails without its fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpolicy.errors import FactError
from kernelpolicy.facts import SOURCES, Facts

from .helpers import cli, one_error_line

M = ["explain", "--gpu", "GB10", "--model", "deepseek-ai/DeepSeek-V3", "--no-env"]


# -- D8: a fact's source is one of the documented vocabulary -------------------------------------


@pytest.mark.parametrize("source", ["bogus", "", "NVML", "user "])
def test_facts_refuse_a_source_outside_the_vocabulary(source: str) -> None:
    with pytest.raises(FactError, match="gpu.sm") as exc:
        Facts(values={"gpu.sm": "sm90"}, sources={"gpu.sm": source})
    assert "is not one of" in str(exc.value)
    with pytest.raises(FactError, match="is not one of"):
        Facts.from_values({"gpu.sm": "sm90"}, source=source)


def test_a_near_miss_source_is_suggested() -> None:
    with pytest.raises(FactError) as exc:
        Facts.from_values({"gpu.sm": "sm90"}, source="nvm")
    assert "did you mean `nvml`" in exc.value.one_line()


@pytest.mark.parametrize("source", SOURCES)
def test_every_documented_source_is_accepted(source: str) -> None:
    assert Facts(values={"gpu.sm": "sm90"}, sources={"gpu.sm": source}).sources["gpu.sm"] == source


def test_sources_every_assembly_uses_are_documented(capsys: pytest.CaptureFixture[str]) -> None:
    """What explain --json reports as sources is inside the vocabulary (the engines', the
    environment's and the venv's sources were used without being in it)."""
    code, out, _ = cli(capsys, *M, "--json", "--env", "VLLM_USE_DEEP_GEMM=0")
    assert code == 0
    sources = json.loads(out)["sources"]
    assert {s.split(":", 1)[0] for s in sources.values()} <= set(SOURCES), sources


# -- N17: nothing accepted silently ---------------------------------------------------------------


def _case(tmp_path: Path, expect: str) -> Path:
    f = tmp_path / "case.yaml"
    f.write_text(f"name: c\ngiven: {{gpu: GB10, model: deepseek-ai/DeepSeek-V3}}\nexpect: {expect}\n", encoding="utf-8")
    return f


@pytest.mark.parametrize("expect", ["{dense: {not: []}}", "{moe: {in: []}}", "{dense: {not: [], in: [cutlass]}}"])
def test_a_case_whose_backend_expectation_checks_nothing_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expect: str
) -> None:
    code, out, _ = cli(capsys, "test", str(_case(tmp_path, expect)))
    assert code == 1
    assert "at least one id" in out


def test_a_case_with_a_real_not_list_still_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "test", str(_case(tmp_path, "{dense: {not: [deep_gemm]}}")))
    assert code == 0, out


@pytest.mark.parametrize("spec", ["deepseek-ai/DeepSeek-V3\n", "deepseek-ai/DeepSeek-V3 ", " deepseek-ai/DeepSeek-V3"])
def test_a_model_id_with_blanks_is_not_read_from_the_catalog(capsys: pytest.CaptureFixture[str], spec: str) -> None:
    code, _, err = cli(capsys, "explain", "--gpu", "GB10", "--model", spec, "--no-env")
    assert code == 2
    assert "unknown model" in one_error_line(err)


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        ({"quant.block": [128]}, "must hold 2 sizes"),
        ({"quant.block": [128, 128, 128]}, "must hold 2 sizes"),
        ({"quant.block": [128, 0]}, "out of range"),
        ({"quant.block": [-128, 128]}, "out of range"),
        ({"deploy.env.vllm_use_deep_gemm": "1"}, "did you mean `deploy.env.VLLM_USE_DEEP_GEMM`"),
        ({"deploy.env.Vllm_Use_Deep_Gemm_E8m0": "0"}, "case-sensitive"),
    ],
)
def test_facts_the_engine_would_never_see_are_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, facts: dict[str, object], words: str
) -> None:
    key = next(iter(facts))
    monkeypatch.setenv("KERNELPOLICY_FACTS", json.dumps(facts))
    code, _, err = cli(capsys, "explain", "--gpu", "GB10", "--model", "deepseek-ai/DeepSeek-V3")
    assert code == 2
    line = one_error_line(err)
    assert "KERNELPOLICY_FACTS" in line and key in line and words in line
    monkeypatch.delenv("KERNELPOLICY_FACTS")
    value = facts[key]
    text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    code, _, err = cli(capsys, *M, "--fact", f"{key}={text}")
    assert code == 2
    assert words in one_error_line(err)


def test_a_lower_case_env_flag_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, *M, "--env", "vllm_use_deep_gemm=1")
    assert code == 2
    assert "VLLM_USE_DEEP_GEMM" in one_error_line(err)


def test_a_proper_block_and_variable_are_still_read(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, *M, "--fact", "quant.block=128,128", "--env", "VLLM_USE_DEEP_GEMM=0", "--json")
    assert code == 0, err
    facts = json.loads(out)["facts"]
    assert facts["quant.block"] == [128, 128] and facts["deploy.env.VLLM_USE_DEEP_GEMM"] == "0"


def test_a_revision_cannot_walk_into_another_repo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = tmp_path / "hub"
    for repo in ("models--evil--x", "models--deepseek-ai--DeepSeek-V3"):
        (hub / repo / "refs").mkdir(parents=True)
        (hub / repo / "snapshots" / "abc").mkdir(parents=True)
    (hub / "models--evil--x" / "refs" / "main").write_text("abc", encoding="utf-8")
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096}
    (hub / "models--evil--x" / "snapshots" / "abc" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = cli(capsys, *M, "--revision", "../../models--evil--x/refs/main")
    assert code == 2
    assert "not in the Hugging Face cache" in one_error_line(err)


# -- N18: messages that say what happened ---------------------------------------------------------


def _model(tmp_path: Path, qc: dict[str, object]) -> Path:
    d = tmp_path / "m"
    d.mkdir()
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096}
    (d / "config.json").write_text(json.dumps({**config, "quantization_config": qc}), encoding="utf-8")
    return d


def test_compressed_tensors_without_quantized_weights_is_not_called_an_unknown_method(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qc = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": None, "targets": ["Linear"]}}}
    code, _, err = cli(capsys, "explain", "--gpu", "GB10", "--model", str(_model(tmp_path, qc)), "--no-env")
    assert code == 2
    line = one_error_line(err)
    assert "quantizes no weights in a scheme kernelpolicy decides" in line
    assert "checkpoints" not in line  # the list of methods it does decide, which names this one


def test_a_bad_weight_block_names_the_file_and_the_field_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _model(tmp_path, {"quant_method": "fp8", "weight_block_size": [0, 0]})
    code, _, err = cli(capsys, "explain", "--gpu", "GB10", "--model", str(model), "--no-env")
    assert code == 2
    line = one_error_line(err)
    assert f"`{model / 'config.json'}`" in line and "`quantization_config.weight_block_size`" in line
