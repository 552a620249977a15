"""Issue #35: the serving modes a launch line states (speculative decoding, SGLang's two-batch
overlap, vLLM's decode context parallel, prefill/decode disaggregation) reach the facts as the
engines read their flags, a line without them means the engine's default, and a bad value is one
line with exit 2."""

from __future__ import annotations

import json

import pytest

from kernelpolicy.cli import main

KEYS = ("deploy.speculative", "deploy.two_batch_overlap", "deploy.dcp", "deploy.disaggregation")


def _facts(capsys: pytest.CaptureFixture[str], line: list[str]) -> dict[str, object]:
    code = main(["explain", "--no-env", "--gpu", "B200", "--json", "--", *line])
    out = capsys.readouterr().out
    assert code == 0, out
    facts = json.loads(out)["facts"]
    return {k: facts[k] for k in KEYS if k in facts}


VLLM = ["vllm", "serve", "deepseek-ai/DeepSeek-V3"]
SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3"]


def test_without_a_line_the_defaults_hold(capsys: pytest.CaptureFixture[str]) -> None:
    """No launch line: the engines' defaults, as for the parallel sizes (source `default`)."""
    assert main(["explain", "--no-env", "--gpu", "B200", "--model", "deepseek-ai/DeepSeek-V3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {k: out["facts"][k] for k in KEYS} == {
        "deploy.speculative": "none",
        "deploy.two_batch_overlap": False,
        "deploy.dcp": 1,
        "deploy.disaggregation": "none",
    }
    assert {out["sources"][k] for k in KEYS} == {"default"}


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        ([], {"deploy.speculative": "none", "deploy.dcp": 1, "deploy.disaggregation": "none"}),
        (
            ["--speculative-config", '{"method": "deepseek_mtp", "num_speculative_tokens": 1}', "-dcp", "4"],
            {"deploy.speculative": "mtp", "deploy.dcp": 4, "deploy.disaggregation": "none"},
        ),
        # vLLM's dotted spelling of a JSON flag's keys, `_` read as `-`
        (
            ["--speculative_config.method", "eagle3", "--speculative_config.model", "some/draft"],
            {"deploy.speculative": "eagle3", "deploy.dcp": 1, "deploy.disaggregation": "none"},
        ),
        (
            ["-sc", '{"model": "[ngram]"}'],
            {"deploy.speculative": "ngram", "deploy.dcp": 1, "deploy.disaggregation": "none"},
        ),
        # a draft model and no method: the draft's checkpoint decides; speculation is on all the same
        (
            ["-sc", '{"model": "some/draft"}'],
            {"deploy.speculative": "other", "deploy.dcp": 1, "deploy.disaggregation": "none"},
        ),
        (
            ["--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}'],
            {"deploy.speculative": "none", "deploy.dcp": 1, "deploy.disaggregation": "decode"},
        ),
        # kv_both is either role, not `none`
        (
            ["--kv-transfer-config", '{"kv_role": "kv_both"}'],
            {"deploy.speculative": "none", "deploy.dcp": 1, "deploy.disaggregation": "both"},
        ),
    ],
)
def test_vllm_serving_modes(capsys: pytest.CaptureFixture[str], flags: list[str], want: dict[str, object]) -> None:
    # a vLLM line leaves SGLang's two-batch overlap at its default
    assert _facts(capsys, [*VLLM, *flags]) == {**want, "deploy.two_batch_overlap": False}


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        ([], {"deploy.speculative": "none", "deploy.two_batch_overlap": False, "deploy.disaggregation": "none"}),
        (
            ["--speculative-algorithm", "NEXTN", "--enable-two-batch-overlap", "--disaggregation-mode", "prefill"],
            {"deploy.speculative": "mtp", "deploy.two_batch_overlap": True, "deploy.disaggregation": "prefill"},
        ),
        (
            ["--speculative-algorithm", "eagle3"],
            {"deploy.speculative": "eagle3", "deploy.two_batch_overlap": False, "deploy.disaggregation": "none"},
        ),
    ],
)
def test_sglang_serving_modes(capsys: pytest.CaptureFixture[str], flags: list[str], want: dict[str, object]) -> None:
    # an SGLang line leaves vLLM's decode context parallel at its default
    assert _facts(capsys, [*SGLANG, *flags]) == {**want, "deploy.dcp": 1}


def test_vllm_config_file_mapping(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    """A YAML ``--config`` gives the JSON flags as mappings; vLLM reads them, so does this."""
    from pathlib import Path

    config = Path(str(tmp_path)) / "serve.yaml"
    config.write_text(
        "speculative_config:\n  method: mtp\n  num_speculative_tokens: 2\ndecode_context_parallel_size: 2\n"
    )
    assert _facts(capsys, [*VLLM, "--config", str(config)]) == {
        "deploy.two_batch_overlap": False,
        "deploy.speculative": "mtp",
        "deploy.dcp": 2,
        "deploy.disaggregation": "none",
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ([*VLLM, "--speculative-config", "{bad"], "`{bad` is not a JSON object"),
        ([*VLLM, "--kv-transfer-config", '{"kv_role": "kv_x"}'], "kv_role `kv_x` is not a vLLM role"),
        ([*VLLM, "-dcp", "0"], "--decode-context-parallel-size `0`: expected a positive size"),
        ([*SGLANG, "--disaggregation-mode", "both"], "--disaggregation-mode `both`: not a mode SGLang has"),
    ],
)
def test_a_bad_value_is_one_line(capsys: pytest.CaptureFixture[str], line: list[str], message: str) -> None:
    assert main(["explain", "--no-env", "--gpu", "B200", "--", *line]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
