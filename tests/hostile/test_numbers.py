"""Hostile input, round three (N5, N6, N10, minor items): numbers at any magnitude or form are
read exactly or refused naming the field; a FIFO as the model is refused at once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelpolicy.facts.quant import ModelConfigError, config_facts

from .helpers import cli, cli_subprocess, one_error_line

BASE: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"},
}


def _model(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(text, encoding="utf-8")
    return d


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"n_routed_experts": -8}, "n_routed_experts"),
        ({"n_routed_experts": []}, "n_routed_experts"),
        ({"n_routed_experts": [-1, 4]}, "n_routed_experts"),
        ({"hidden_size": -7168}, "hidden_size"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_experts_per_tok": -1}, "num_experts_per_tok"),
        ({"hidden_size": 2**70}, "hidden_size"),
    ],
)
def test_nonsense_sizes_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: dict[str, Any], field: str
) -> None:
    m = _model(tmp_path, json.dumps({**BASE, **edit}))
    code, _, err = cli(capsys, "explain", "--gpu", "H100", "--model", str(m), "--no-env")
    assert code == 2
    assert field in one_error_line(err)


def test_a_5000_digit_number_in_config_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = _model(tmp_path, json.dumps(BASE).replace("7168", "9" * 5000))
    code, _, err = cli(capsys, "explain", "--gpu", "H100", "--model", str(m), "--no-env")
    assert code == 2
    assert "config.json" in one_error_line(err) and "too large" in err


@pytest.mark.parametrize("value", ["0", "-5", "9" * 30, "9" * 5000])
def test_deploy_sizes_out_of_range_are_refused(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, _, err = cli(
        capsys,
        "explain",
        "--gpu",
        "H100",
        "--model",
        "deepseek-ai/DeepSeek-V3",
        "--no-env",
        "--fact",
        f"deploy.tp={value}",
    )
    assert code == 2
    assert "deploy.tp" in one_error_line(err)


def test_kernelpolicy_facts_out_of_range_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELPOLICY_FACTS", '{"deploy.tp": -3}')
    code, _, err = cli(capsys, "explain", "--gpu", "H100", "--model", "deepseek-ai/DeepSeek-V3")
    assert code == 2
    line = one_error_line(err)
    assert "KERNELPOLICY_FACTS" in line and "deploy.tp" in line


def test_a_fifo_as_the_model_is_refused_at_once(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    os.mkfifo(d / "config.json")
    res = cli_subprocess("explain", "--gpu", "H100", "--model", str(d), "--no-env", timeout=30)
    assert res.returncode == 2 and "config.json" in res.stderr and "Traceback" not in res.stderr
    res = cli_subprocess("explain", "--gpu", "H100", "--model", str(d / "config.json"), "--no-env", timeout=30)
    assert res.returncode == 2 and "FIFO" in res.stderr


_NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**60), max_value=10**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.just(10**4000),
    st.just(-(10**4000)),
)


@settings(max_examples=200, deadline=None)
@given(
    field=st.sampled_from(["hidden_size", "n_routed_experts", "num_experts_per_tok", "intermediate_size"]), n=_NUMBERS
)
def test_any_number_in_a_size_field_is_read_exactly_or_refused_naming_it(field: str, n: Any) -> None:
    facts: dict[str, object] | None = None
    error = ""
    try:
        facts = config_facts({**BASE, field: n})
    except ModelConfigError as exc:
        error = str(exc)
    if facts is None:
        # fewer experts than the 8 each token takes is refused naming num_experts_per_tok (round four)
        fewer = field == "n_routed_experts" and type(n) is int and 1 < n < BASE["num_experts_per_tok"]
        assert field in error or "gives fact" in error or (fewer and "more than the model's" in error), error
        return
    assert type(n) is int and 0 <= n < 2**63  # accepted: an integer in range, read as written
    if field == "hidden_size":
        assert facts["model.hidden_size"] == n


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ('{"a":' * 5000 + "1" + "}" * 5000, "nested too deeply"),
        ('{"deploy.tp": ' + "9" * 5000 + "}", "number too large"),
        ('{"deploy.tp": 99999999999999999999999}', "too large"),
    ],
)
def test_kernelpolicy_facts_outside_the_guards_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, raw: str, words: str
) -> None:
    monkeypatch.setenv("KERNELPOLICY_FACTS", raw)
    code, _, err = cli(capsys, "explain", "--gpu", "H100", "--model", "deepseek-ai/DeepSeek-V3")
    assert code == 2
    line = one_error_line(err)
    assert "KERNELPOLICY_FACTS" in line and words in line
