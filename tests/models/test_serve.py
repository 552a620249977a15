"""A deployment in vLLM's words (serve line, --config file, flag spellings) decides the same
as kernelpolicy's native flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelpolicy.cli import main

from . import configs as c
from .conftest import write_cache

MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"
#: what a serve line means by leaving --enable-lora, --enforce-eager and --kv-cache-dtype out (vLLM's
#: defaults, from vLLM's flag table)
SERVE_DEFAULTS = (
    "--fact",
    "deploy.lora=false",
    "--fact",
    "deploy.cuda_graphs=true",
    "--fact",
    "deploy.kv_cache_dtype=auto",
    # the serving modes a whole vLLM line without their flags states (issue #35)
    "--fact",
    "deploy.speculative=none",
    "--fact",
    "deploy.dcp=1",
    "--fact",
    "deploy.disaggregation=none",
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["explain", "--no-env", "--json", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else {}), out.err


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("facts", "paths", "overrides", "assumptions", "fingerprint"):
        assert a[key] == b[key], key


@pytest.mark.parametrize(
    ("native", "serve"),
    [
        (
            ["--model", MODEL, "--fact", "deploy.tp=2"],
            ["vllm", "serve", MODEL, "-tp", "2", "--moe-backend", "auto"],
        ),
        (
            ["--model", MODEL, "--moe-backend", "triton", "--env", "VLLM_USE_DEEP_GEMM=0"],
            ["VLLM_USE_DEEP_GEMM=0", "vllm", "serve", MODEL, "--moe-backend", "triton"],
        ),
        (
            ["--model", MODEL, "--fact", "deploy.tp=2", "--fact", "deploy.ep=4"],
            ["vllm", "serve", "--model", MODEL, "--tensor-parallel-size", "2", "-dp", "2", "--enable-expert-parallel"],
        ),
        (
            ["--model", MODEL, "--moe-backend", "vllm_cutlass"],
            ["vllm", "serve", MODEL, "--moe_backend=cutlass"],  # vLLM's name and its underscore spelling
        ),
        (
            ["--model", MODEL, "--moe-backend", "triton", "--linear-backend", "cutlass"],
            ["vllm", "serve", MODEL, "--moe-backend", "Triton", "--linear-backend", "CUTLASS"],  # vLLM lowercases
        ),
        (
            ["--model", MODEL, "--fact", "deploy.kv_cache_dtype=fp8", "--fact", "deploy.max_num_batched_tokens=8192"],
            ["vllm serve " + MODEL + " --kv-cache-dtype fp8 --max-num-batched-tokens 8192"],  # quoted as one
        ),
    ],
)
def test_serve_line_decides_as_native_flags(
    capsys: pytest.CaptureFixture[str], native: list[str], serve: list[str]
) -> None:
    code_a, a, err_a = _run(capsys, "--gpu", "GB10", *SERVE_DEFAULTS, *native)
    code_b, b, err_b = _run(capsys, "--gpu", "GB10", "--", *serve)
    assert (code_a, err_a) == (code_b, err_b)
    _same(a, b)


@pytest.mark.parametrize(
    ("native", "vllm_flags"),
    [
        (["--fact", "deploy.tp=4"], ["-tp", "4"]),
        (["--fact", "model.activation_dtype=float16"], ["--dtype", "half"]),
        (["--fact", "deploy.tp=2", "--fact", "deploy.ep=2"], ["--tensor-parallel-size", "2", "-ep"]),
        (["--fact", "deploy.lora=true", "--fact", "deploy.cuda_graphs=false"], ["--enable-lora", "--enforce-eager"]),
    ],
)
def test_vllm_flag_spellings_are_explain_options(
    capsys: pytest.CaptureFixture[str], native: list[str], vllm_flags: list[str]
) -> None:
    _, a, _ = _run(capsys, "--gpu", "H100", "--model", MODEL, *native)
    _, b, err = _run(capsys, "--gpu", "H100", "--model", MODEL, *vllm_flags)
    assert err == ""
    _same(a, b)


def test_vllm_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(f"model: {MODEL}\ntensor_parallel_size: 2\nenable-expert-parallel: true\nmax-model-len: 8192\n")
    native = ("--model", MODEL, "--fact", "deploy.tp=2", "--fact", "deploy.ep=2", *SERVE_DEFAULTS)
    _, a, _ = _run(capsys, "--gpu", "B200", *native)
    _, b, err = _run(capsys, "--gpu", "B200", "--config", str(config))
    _same(a, b)
    assert "`--max-model-len`" in err  # a flag that decides no kernel is named, not silently dropped
    # the serve line wins over its --config file, as in vLLM
    _, d, _ = _run(capsys, "--gpu", "B200", "--", "vllm", "serve", "--config", str(config), "-tp", "4")
    assert d["facts"]["deploy.tp"] == 4 and d["facts"]["deploy.ep"] == 4


def test_bad_config_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("- a list\n")
    code, _, err = _run(capsys, "--gpu", "B200", "--model", MODEL, "--config", str(config))
    assert code == 2 and err.count("\n") == 1 and f"--config `{config}`: expected a mapping" in err


def test_serve_line_and_option_disagree(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--gpu", "H100", "-tp", "2", "--", "vllm", "serve", MODEL, "-tp", "4")
    assert code == 2 and "--tensor-parallel-size given twice: `2` as an option and `4` in the serve line" in err


def test_not_a_serve_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--gpu", "H100", "--", "vllm", "bench", MODEL)
    assert code == 2 and "serve line: expected `vllm serve MODEL [FLAGS]`" in err


def test_quantization_flag_matches_the_checkpoint(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--gpu", "H100", "--model", MODEL, "--quantization", "fp8")
    assert code == 0, err
    code, _, err = _run(capsys, "--gpu", "H100", "--model", MODEL, "--quantization", "awq")
    assert code == 2 and "--quantization `awq` does not match the checkpoint's quantization `fp8`" in err


def test_online_fp8_of_an_unquantized_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cache(tmp_path, "meta-llama/Llama-4-Scout-17B-16E-Instruct", {"config.json": c.LLAMA4_SCOUT})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    serve = ["vllm", "serve", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "--quantization", "fp8"]
    _, d, err = _run(capsys, "--gpu", "H100", "--", *serve)
    assert d["facts"]["quant.scheme"] == "fp8_tensor", err
    assert d["facts"]["quant.moe_scheme"] == "fp8_tensor"
    assert d["sources"]["quant.scheme"] == "user"


def test_misspelt_vllm_variable_warns(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--gpu", "H100", "--model", MODEL, "--env", "VLLM_USE_DEEPGEMM=1")
    assert code == 0
    assert err == (
        "kernelpolicy: warning: --env `VLLM_USE_DEEPGEMM`: no rule reads this vLLM variable"
        " (did you mean `VLLM_USE_DEEP_GEMM`?)\n"
    )
    _, _, err = _run(capsys, "--gpu", "H100", "--model", MODEL, "--env", "VLLM_USE_DEEP_GEMM=0")
    assert err == ""


def test_unknown_allow_rule_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--gpu", "GB10", "--model", MODEL, "--allow", "deep_gemm-no-sm120-sf-layuot")
    assert code == 2 and "did you mean `deep_gemm-no-sm120-sf-layout`?" in err
    code, _, err = _run(capsys, "--gpu", "GB10", "--model", MODEL, "--allow", "catalog.moe.flashinfer_trtllm")
    assert code == 0, err


def test_unknown_engine_release_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--gpu", "GB10", "--model", MODEL, "--engine", "vllm==0.99.0")
    assert code == 2 and "--engine `vllm==0.99.0`: not a vLLM release kernelpolicy knows" in err
    code, _, err = _run(capsys, "--gpu", "GB10", "--model", MODEL, "--engine", "vllm==0.26.0")
    assert code == 0, err


def test_vllm_value_the_rules_do_not_name_is_left_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    code, d, err = _run(capsys, "--gpu", "B200", "--model", MODEL, "--kv-cache-dtype", "fp8_ds_mla")
    assert code == 0
    assert "deploy.kv_cache_dtype" not in d["facts"]
    assert "`fp8_ds_mla` is not a value of `deploy.kv_cache_dtype` the rules know" in err


def test_api_server_entrypoint_form(capsys: pytest.CaptureFixture[str]) -> None:
    line = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL, "--tensor_parallel_size", "2"]
    _, a, _ = _run(capsys, "--gpu", "H200", "--", *line)
    _, b, _ = _run(capsys, "--gpu", "H200", "--model", MODEL, "-tp", "2", *SERVE_DEFAULTS)
    _same(a, b)


def test_a_serve_line_leaves_nothing_unknown_that_vllm_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    _, d, _ = _run(capsys, "--gpu", "GB10", "--", "vllm", "serve", MODEL)
    assert (d["facts"]["deploy.lora"], d["facts"]["deploy.cuda_graphs"]) == (False, True)
    _, d, _ = _run(capsys, "--gpu", "GB10", "--model", MODEL)  # options state only what they say
    assert "deploy.lora" not in d["facts"]
    _, d, _ = _run(capsys, "--gpu", "GB10", "--", "vllm", "serve", MODEL, "--enable-lora")
    assert d["facts"]["deploy.lora"] is True


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tp=st.sampled_from([None, 1, 2, 8]),
    dp=st.sampled_from([None, 1, 4]),
    ep=st.booleans(),
    kv=st.sampled_from([None, "auto", "fp8", "fp8_e5m2"]),
    tokens=st.sampled_from([None, 2048, 16384]),
    moe=st.sampled_from([None, "auto", "triton", "marlin", "cutlass"]),
    gpu=st.sampled_from(["GB10", "H100", "B200", "RTX 5090"]),
)
def test_any_serve_line_decides_as_the_native_flags(
    capsys: pytest.CaptureFixture[str],
    tp: int | None,
    dp: int | None,
    ep: bool,
    kv: str | None,
    tokens: int | None,
    moe: str | None,
    gpu: str,
) -> None:
    line = ["vllm", "serve", MODEL]
    native = ["--model", MODEL, *SERVE_DEFAULTS]
    for flag, value in (("-tp", tp), ("-dp", dp), ("--kv-cache-dtype", kv), ("--max-num-batched-tokens", tokens)):
        if value is not None:
            line += [flag, str(value)]
    if tp is not None:
        native += ["--fact", f"deploy.tp={tp}"]
    if ep:
        line.append("--enable-expert-parallel")
        native += ["--fact", f"deploy.ep={(tp or 1) * (dp or 1)}"]
    if kv is not None:
        native += ["--fact", f"deploy.kv_cache_dtype={kv}"]
    if tokens is not None:
        native += ["--fact", f"deploy.max_num_batched_tokens={tokens}"]
    if moe is not None:
        line += ["--moe-backend", moe]
        if moe != "auto":
            native += ["--moe-backend", {"cutlass": "vllm_cutlass"}.get(moe, moe)]
    code_a, a, err_a = _run(capsys, "--gpu", gpu, *native)
    code_b, b, err_b = _run(capsys, "--gpu", gpu, "--", *line)
    assert (code_a, err_a) == (code_b, err_b)
    if a:
        _same(a, b)


@pytest.mark.parametrize(
    "launch",
    [
        ["python3", "-m", "sglang.launch_server"],
        ["python", "-m", "sglang.launch_server"],
        ["/opt/venv/bin/python3.12", "-m", "sglang.launch_server"],
        ["sglang", "serve"],
    ],
)
def test_sglang_launch_lines_read_sglang_flags(launch: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """An SGLang launch line is read through SGLang's flag table (it failed with "unknown model
    `python3`"): its model, its parallel sizes, its backend flags, and the engine."""
    line = [*launch, "--model-path", MODEL, "--tp-size", "2", "--ep-size", "2", "--moe-runner-backend", "triton"]
    code, d, err = _run(capsys, "--gpu", "H100", "--", *line)
    assert code == 0, err
    facts = d["facts"]
    assert facts["deploy.engine"] == "sglang" and facts["model.type"]
    assert (facts["deploy.tp"], facts["deploy.ep"], facts["deploy.moe_backend"]) == (2, 2, "triton")
    assert d["model"] == MODEL


def test_sglang_line_decides_as_the_engine_option(capsys: pytest.CaptureFixture[str]) -> None:
    _, a, _ = _run(capsys, "--gpu", "B200", "--", "python3", "-m", "sglang.launch_server", "--model-path", MODEL)
    _, b, _ = _run(capsys, "--gpu", "B200", "--model", MODEL, "--fact", "deploy.engine=sglang")
    assert a["paths"] == b["paths"]


def test_a_python_module_that_is_no_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--gpu", "H100", "--", "python3", "-m", "http.server", MODEL)
    assert code == 2 and "`python3 -m http.server` starts no engine kernelpolicy knows (vLLM, SGLang)" in err
    assert len(err.strip().splitlines()) == 1


def test_engine_option_and_launch_line_disagree(capsys: pytest.CaptureFixture[str]) -> None:
    line = ["python3", "-m", "sglang.launch_server", "--model-path", MODEL]
    code, _, err = _run(capsys, "--gpu", "H100", "--engine", "vllm==0.26.0", "--", *line)
    assert code == 2 and "names another engine than the launch line's (sglang)" in err
    code, d, err = _run(capsys, "--gpu", "H100", "--engine", "sglang==0.5.23", "--", *line)
    assert code == 0, err
    assert (d["facts"]["deploy.engine"], d["facts"]["sglang.version"]) == ("sglang", "0.5.23")


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        (["--hf-overrides", '{"num_experts": 8}'], '`--hf-overrides {"num_experts": 8}`'),
        (["--hf_overrides={}"], "`--hf-overrides {}`"),
        (["--hf-config-path", "/models/other"], "`--hf-config-path /models/other`"),
        (["--config-format", "mistral"], "`--config-format mistral`"),
    ],
)
def test_flags_that_change_the_config_are_refused(
    flags: list[str], shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """They change the config vLLM builds: never dropped as "flags that decide no kernel"."""
    code, _decision, err = _run(capsys, "--gpu", "H100", "--", "vllm", "serve", MODEL, *flags)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{shown} changes the model config vLLM builds, which kernelpolicy does not read" in err
    assert "decide no kernel" not in err


def test_config_format_of_hugging_face_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    code, decision, err = _run(capsys, "--gpu", "H100", "--", "vllm", "serve", MODEL, "--config-format", "hf")
    assert code == 0 and "config-format" not in err, err
    assert decision["facts"]["model.type"]


def test_hf_overrides_in_a_config_file_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("hf_overrides:\n  num_experts: 8\n")
    code, _decision, err = _run(capsys, "--gpu", "H100", "--model", MODEL, "--config", str(config))
    assert code == 2 and "`--hf-overrides" in err and "changes the model config" in err, err


@pytest.mark.parametrize(
    ("given", "tokens"),
    [("16K", 16384), ("16k", 16000), ("25.6k", 25600), ("1M", 1048576), (" 8192", 8192)],
)
def test_human_integers_read_as_vllm_reads_them(capsys: pytest.CaptureFixture[str], given: str, tokens: int) -> None:
    """Found as: `--max-num-batched-tokens 16K`, which vLLM accepts, was refused ("invalid int")."""
    for argv in (
        ["--", "vllm", "serve", MODEL, "--max-num-batched-tokens", given],
        ["--model", MODEL, f"--max-num-batched-tokens={given}"],
    ):
        code, d, err = _run(capsys, "--gpu", "H200", *argv)
        assert code == 0, err
        assert d["facts"]["deploy.max_num_batched_tokens"] == tokens


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("1.5K", "decimals are not allowed with binary suffixes like K: did you mean `1.5k`?"),
        ("lots", "invalid integer `lots`"),
    ],
)
def test_what_vllm_refuses_is_one_line(capsys: pytest.CaptureFixture[str], given: str, message: str) -> None:
    assert main(["explain", "--gpu", "H200", "--", "vllm", "serve", MODEL, "--max-num-batched-tokens", given]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "serve line: argument --max-num-batched-tokens: " + message in err
