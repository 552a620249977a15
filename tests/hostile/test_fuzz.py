"""Fuzzing the command line (hypothesis): random argv and random rule files see only the
documented exit statuses (0, 1 findings, 2 bad input, 3 no backend), a bad input is one line
on stderr, and nothing is ever a traceback or an internal error."""

from __future__ import annotations

import contextlib
import io
import itertools
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kernelpolicy.cli import main
from kernelpolicy.facts import BACKENDS, FACT_KEYS

from .helpers import EXIT_CODES, EXPLAIN_EXIT_CODES

_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
_FILES = itertools.count()

OPTIONS = [
    "--gpu",
    "--model",
    "--fact",
    "--env",
    "--policy",
    "--moe-backend",
    "--linear-backend",
    "--allow",
    "--engine",
    "--model-type",
    "--quant",
    "--scale-fmt",
    "--json",
    "--no-env",
    "-q",
    "--bare",
    "--no-coverage",
    "--help",
]
VALUES = [
    "sm121",
    "sm90",
    "H200",
    "GB10",
    "12.1",
    "sm999",
    "",
    " ",
    "-",
    "--",
    "~nouser/x",
    "/dev/zero",
    "/",
    "/nonexistent.yaml",
    ".",
    "Qwen/Qwen3.6-35B-A3B-FP8",
    "deepseek-ai/DeepSeek-V3",
    "no/such",
    "gpu.sm=sm121",
    "gpu.sm=5",
    "gpu.sm=",
    "no.such=1",
    "=",
    "x=y",
    "VLLM_USE_DEEP_GEMM=1",
    "deploy.tp=-1",
    "quant.block=[a,b]",
    "vllm==0.26.0",
    "vllm==x",
    "sglang==1",
    "triton",
    "cutlass",
    "deep_gemm",
    "qwen3_moe",
    "fp8_block",
    "ue8m0",
    "é",
    "x" * 300,
    "{}",
    "[",
    "tests/cases",
]
COMMANDS = ["explain", "test", "check", "schema", "diff"]

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
_token = st.one_of(st.sampled_from(OPTIONS), st.sampled_from(VALUES), _text)


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def _assert_documented(argv: list[str], code: int, err: str) -> None:
    assert code in (EXPLAIN_EXIT_CODES if argv[0] == "explain" else EXIT_CODES), (argv, code, err)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    lines = err.strip().splitlines()
    assert all(line.startswith("kernelpolicy") for line in lines), (argv, err)
    if code == 2:
        assert len(lines) == 1, (argv, err)


@pytest.mark.property
@_SETTINGS
@given(
    command=st.sampled_from(COMMANDS),
    tokens=st.lists(_token, max_size=8),
)
def test_argv(command: str, tokens: list[str]) -> None:
    if command == "check" and "--no-coverage" not in tokens:
        tokens = [*tokens, "--no-coverage"]  # the exhaustive run takes seconds: not what is fuzzed here
    argv = [command, *tokens]
    code, err = _run(argv)
    _assert_documented(argv, code, err)


@pytest.mark.property
@_SETTINGS
@given(tokens=st.lists(_token, max_size=6))
@example(tokens=["--moe-backend", "cutlass"])  # exits 5, which `explain` documents
def test_explain_argv(tokens: list[str]) -> None:
    argv = ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", *tokens]
    code, err = _run(argv)
    _assert_documented(argv, code, err)


# --------------------------------------------------------------------------- rule files

_ids = st.sampled_from([*sorted({b for bs in BACKENDS.values() for b in bs}), "nope", ""])
_keys = st.sampled_from([*list(FACT_KEYS)[:40], "gpu.famly", "all", "any", "not", "deploy.env.X"])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 5000),
    st.floats(allow_nan=False),
    _text,
    st.sampled_from(["sm120", "sm121", ">=0.24", "fp8_block", "crash", "perf", "off", "yes"]),
)
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3), max_leaves=8
)
_fields = st.sampled_from(
    [
        "id",
        "when",
        "deny",
        "prefer",
        "require",
        "use",
        "backend",
        "paths",
        "severity",
        "because",
        "refs",
        "until",
        "overrides",
        "help",
        "becuase",
        "set",
        "unless",
        "backends",
        "requires",
        "warmup",
        "auto",
        "path",
        "name",
        "sm",
        "value",
        "env",
    ]
)
_field_values = st.one_of(
    _values,
    _ids,
    st.lists(_ids, max_size=3),
    st.dictionaries(_keys, _values, max_size=3),
    st.sampled_from([["dense"], ["moe", "warmup"], "crash", "accuracy", "because"]),
)
_entries = st.dictionaries(_fields, _field_values, max_size=7)
_sections = st.sampled_from(["rules", "implies", "backends", "order", "models", "gpus", "engine", "rulez"])
_documents = st.one_of(
    st.dictionaries(_sections, st.one_of(st.lists(_entries, max_size=3), _entries, _scalars), max_size=3),
    _values,
)


def _render(doc: object, mutation: str, at: int) -> str:
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    at = min(at, len(text))
    return text[:at] + mutation + text[at:]


@pytest.mark.property
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    doc=_documents,
    mutation=st.one_of(
        st.just(""), st.sampled_from(["&a ", "*a", "!!python/object:os.system ", "\t", ":", "- "]), _text
    ),
    at=st.integers(0, 400),
    bare=st.booleans(),
)
def test_rule_files(tmp_path_factory: pytest.TempPathFactory, doc: object, mutation: str, at: int, bare: bool) -> None:
    folder: Path = tmp_path_factory.getbasetemp() / "fuzz-rules"
    folder.mkdir(exist_ok=True)
    path = folder / f"r{next(_FILES)}.yaml"
    path.write_text(_render(doc, mutation, at), encoding="utf-8")
    for argv in (
        ["explain", "--no-env", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--policy", str(path)],
        ["check", "--no-coverage", *(["--bare"] if bare else []), str(path)],
    ):
        code, err = _run(argv)
        _assert_documented(argv, code, err)


def test_an_explicit_choice_refused_exits_with_its_documented_status(capsys: pytest.CaptureFixture[str]) -> None:
    """The case the fuzzing found: `explain` exits 5 (documented) with one line naming the choice."""
    argv = ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--moe-backend", "cutlass"]
    code, err = _run(argv)
    _assert_documented(argv, code, err)
    assert code == 5 and "`--moe-backend" in err and len(err.strip().splitlines()) == 1
