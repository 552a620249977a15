"""Hostile input, round three (N1): engine variables are read as the engine release reads them.

vLLM reads ``VLLM_USE_DEEP_GEMM_E8M0`` as ``bool(int(text))``: ``00``, `` 0``, ``+0``, ``-0``
and ``0_0`` all turn it off, so the crash/accuracy rule that ``=0`` triggers must apply to
them too, in ``explain`` (``--env``, a serve line, the shell's environment) and in the plugin;
``false`` stops vLLM (``int()`` refuses it), so kernelpolicy refuses it too (exit 2). The parser
of each variable is the one the release's ``envs.py`` uses, recorded by the release scan.
"""

from __future__ import annotations

import ast
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernelpolicy as kp
from kernelpolicy.deployment.pipeline import build_facts
from kernelpolicy.errors import FactError
from kernelpolicy.releases.vllm._scan import _env_parser
from kernelpolicy.releases.vllm.env import EnvValueError, engine_env_value, env_parser
from kernelpolicy.releases.vllm.versions import release_records

from .helpers import cli, one_error_line

GB10 = [
    "explain",
    "--gpu",
    "GB10",
    "--model",
    "deepseek-ai/DeepSeek-V3",
    "--fact",
    "deep_gemm.has_sm120_sf_layout=true",
    "--fact",
    "deep_gemm.source=vendored",
    "--no-env",
    "--json",
]
#: spellings of zero that Python's int() (and so vLLM) reads as 0
ZEROS = ("0", "00", " 0", "0 ", "+0", "-0", "0_0", "\t0\n", "０")
#: values vLLM's int() refuses: vLLM stops at start-up
REFUSED = ("false", "no", "off", "", " ", "0x0", "0.0", "1e0", "_0", "0__0", "1" * 5000)


def _paths(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    code, out, err = cli(capsys, *GB10, *extra)
    assert code == 0, err
    data = json.loads(out)
    return {p: data["paths"][p].get("backend", data["paths"][p].get("kernels")) for p in ("dense", "moe", "warmup")}


@pytest.mark.parametrize("text", ZEROS)
def test_int_flag_zero_spellings_read_as_zero(text: str) -> None:
    assert engine_env_value("VLLM_USE_DEEP_GEMM_E8M0", text) == "0"
    assert engine_env_value("VLLM_USE_DEEP_GEMM", text) == "0"


@pytest.mark.parametrize("text", REFUSED)
def test_int_flag_refuses_what_vllm_refuses(text: str) -> None:
    with pytest.raises(EnvValueError):
        engine_env_value("VLLM_USE_DEEP_GEMM_E8M0", text)


@given(st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from(["", " ", "\t"]), st.booleans())
def test_int_flag_follows_python_int(n: int, pad: str, plus: bool) -> None:
    text = pad + ("+" if plus and n >= 0 else "") + str(n) + pad
    assert engine_env_value("VLLM_USE_DEEP_GEMM_E8M0", text) == str(int(bool(int(text))))


@given(st.text(max_size=12))
def test_any_text_is_read_as_python_reads_it_or_refused(text: str) -> None:
    try:
        expected: str | None = str(int(bool(int(text))))
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(EnvValueError):
            engine_env_value("VLLM_USE_DEEP_GEMM_E8M0", text)
    else:
        assert engine_env_value("VLLM_USE_DEEP_GEMM_E8M0", text) == expected


def test_choices_are_case_sensitive_as_in_vllm() -> None:
    assert engine_env_value("VLLM_MARLIN_INPUT_DTYPE", "fp8") == "fp8"
    for bad in ("FP8", "fp8 ", "int4"):
        with pytest.raises(EnvValueError, match="accepts only"):
            engine_env_value("VLLM_MARLIN_INPUT_DTYPE", bad)
    assert engine_env_value("VLLM_DEEP_GEMM_WARMUP", "skip") == "skip"
    with pytest.raises(EnvValueError):
        engine_env_value("VLLM_DEEP_GEMM_WARMUP", "SKIP")


def test_truthy_flags_and_unknown_variables() -> None:
    # VLLM_TEST_FORCE_FP8_MARLIN: `text.strip().lower() in ("1", "true")` (0.24-0.28)
    assert engine_env_value("VLLM_TEST_FORCE_FP8_MARLIN", " TRUE ", "0.28.0") == "1"
    assert engine_env_value("VLLM_TEST_FORCE_FP8_MARLIN", "yes", "0.28.0") == "0"
    assert engine_env_value("NOT_A_VLLM_VARIABLE", " 00 ") == " 00 "


def test_every_parser_is_the_scanned_one() -> None:
    # the table comes from the release scan: each release's record names its parser per variable
    for version, record in release_records().items():
        assert set(record["env_parsers"]) == set(record["env"]), version
        assert record["env_parsers"]["VLLM_USE_DEEP_GEMM_E8M0"] == {"kind": "int_flag"}, version
        found = env_parser("VLLM_USE_DEEP_GEMM_E8M0", version)
        assert found is not None and found[0] == version


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("lambda: bool(int(os.getenv('X', '1')))", {"kind": "int_flag"}),
        ("lambda: bool(int(os.environ['X'])) if 'X' in os.environ else True", {"kind": "int_flag"}),
        ("lambda: int(os.getenv('X', '7'))", {"kind": "int"}),
        (
            "env_with_choices('X', None, ['a', 'b'], case_sensitive=False)",
            {"kind": "choices", "choices": ["a", "b"], "case_sensitive": False},
        ),
        ("env_with_choices('X', 'a', ['a'])", {"kind": "choices", "choices": ["a"], "case_sensitive": True}),
        (
            "lambda: os.environ.get('X', '0').strip().lower() in ('1', 'true')",
            {"kind": "truthy", "true": ["1", "true"], "methods": ["strip", "lower"]},
        ),
        ("lambda: os.environ.get('X', '0') == '1'", {"kind": "truthy", "true": ["1"], "methods": []}),
        ("lambda: os.getenv('X', '').lower()", {"kind": "text", "methods": ["lower"]}),
        ("lambda: helper(os.getenv('X'))", {"kind": "other"}),
        ("lambda: bool(int(os.getenv('X', '1').strip()))", {"kind": "other"}),
    ],
)
def test_scanner_reads_each_parser_form(source: str, expected: dict[str, object]) -> None:
    assert _env_parser(ast.parse(source, mode="eval").body) == expected


def test_explain_env_reads_zero_spellings_as_zero(capsys: pytest.CaptureFixture[str]) -> None:
    zero = _paths(capsys, "--env", "VLLM_USE_DEEP_GEMM_E8M0=0")
    assert zero["dense"] != "deep_gemm" and zero["moe"] != "deep_gemm"
    for text in ("00", " 0", "+0", "-0", "0_0"):
        assert _paths(capsys, "--env", f"VLLM_USE_DEEP_GEMM_E8M0={text}") == zero, text


def test_serve_line_reads_zero_spellings_as_zero(capsys: pytest.CaptureFixture[str]) -> None:
    zero = _paths(capsys, "--", "VLLM_USE_DEEP_GEMM_E8M0=0 vllm serve deepseek-ai/DeepSeek-V3")
    assert _paths(capsys, "--", "VLLM_USE_DEEP_GEMM_E8M0=00 vllm serve deepseek-ai/DeepSeek-V3") == zero
    assert _paths(capsys, "--", "VLLM_USE_DEEP_GEMM=00 vllm serve deepseek-ai/DeepSeek-V3")["dense"] != "deep_gemm"


def test_environment_is_read_as_vllm_reads_it(policy: kp.Policy) -> None:
    built = build_facts(policy, environ={"VLLM_USE_DEEP_GEMM_E8M0": "0_0", "VLLM_USE_DEEP_GEMM": " 1"})
    assert built.facts.get("deploy.env.VLLM_USE_DEEP_GEMM_E8M0") == "0"
    assert built.facts.get("deploy.env.VLLM_USE_DEEP_GEMM") == "1"
    with pytest.raises(FactError, match="VLLM_USE_DEEP_GEMM_E8M0"):
        build_facts(policy, environ={"VLLM_USE_DEEP_GEMM_E8M0": "false"})
    # the release named decides the parser: 0.28 still reads VLLM_TEST_FORCE_FP8_MARLIN
    built = build_facts(policy, facts={"vllm.version": "0.28.0"}, env={"VLLM_TEST_FORCE_FP8_MARLIN": "True"})
    assert built.facts.get("deploy.env.VLLM_TEST_FORCE_FP8_MARLIN") == "1"


@pytest.mark.parametrize(
    "assign", ["VLLM_USE_DEEP_GEMM_E8M0=false", "VLLM_USE_DEEP_GEMM=no", "VLLM_MARLIN_INPUT_DTYPE=FP8"]
)
def test_values_vllm_refuses_exit_2(capsys: pytest.CaptureFixture[str], assign: str) -> None:
    code, _, err = cli(capsys, *GB10, "--env", assign)
    assert code == 2
    assert assign.split("=", maxsplit=1)[0] in one_error_line(err)


def test_plugin_reads_the_environment_as_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpolicy.adapters import vllm as plugin

    monkeypatch.setattr(plugin._STATE, "environ", {"VLLM_USE_DEEP_GEMM_E8M0": "00"})
    facts = plugin._pipeline_facts({"gpu.sm": "sm121"})
    assert facts.get("deploy.env.VLLM_USE_DEEP_GEMM_E8M0") == "0"
    monkeypatch.setattr(plugin._STATE, "environ", {"VLLM_USE_DEEP_GEMM_E8M0": "off"})
    with pytest.raises(FactError):
        plugin._pipeline_facts({"gpu.sm": "sm121"})
