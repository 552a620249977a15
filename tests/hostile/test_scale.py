"""Hostile input, round three, N16 (scale): a serve line is read in linear work and its warning
is bounded. No timing here (benchmarks/bench_hostile.py prints the figures): the tests count the
work argparse is given and the length of what is printed."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelpolicy.deployment.serve import _parse_serve, ignored_note
from kernelpolicy.releases import line as _line
from kernelpolicy.releases import spec
from kernelpolicy.releases.line import _FLAGS_PER_PARSE, serve_parser
from kernelpolicy.releases.line import parse_known as _parse_known

from .conftest import SETTINGS
from .helpers import cli


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch argparse so that each parse records how many flags it was given."""
    sizes: list[int] = []
    real = argparse.ArgumentParser.parse_known_args

    def counted(self: argparse.ArgumentParser, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        sizes.append(sum(self._parse_optional(t) is not None for t in args or ()))
        return real(self, args, namespace)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", counted)
    return sizes


@pytest.mark.parametrize("pairs", [1, 200, 16_000])
@pytest.mark.parametrize("flag", ["--foo", "-tp", "--dtype", "-x"])
def test_a_long_serve_line_is_parsed_in_bounded_runs(monkeypatch: pytest.MonkeyPatch, pairs: int, flag: str) -> None:
    # argparse's parse is quadratic in the flags of one call: 16,000 `--foo 1` pairs took 21 s
    sizes = _counting(monkeypatch)
    value = "auto" if flag == "--dtype" else "1"
    s = _parse_serve(["vllm", "serve", "m", *[flag, value] * pairs])
    assert sizes and max(sizes) <= _FLAGS_PER_PARSE
    assert sum(sizes) == pairs  # every flag looked at once: linear work
    if flag in ("--foo", "-x"):
        assert len(s.ignored) == pairs
    else:
        assert not s.ignored and s.values


def test_the_ignored_flags_warning_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    line = "vllm serve deepseek-ai/DeepSeek-V3 " + " ".join(f"--foo{i} 1" for i in range(16_000))
    code, _, err = cli(capsys, "explain", "--gpu", "H100", "--no-env", "--", line)
    assert code == 0
    warning = [w for w in err.splitlines() if "ignored" in w]
    assert len(warning) == 1, err[:400]
    assert len(warning[0]) < 600 and "`--foo0`" in warning[0] and "and 15992 more" in warning[0]


@pytest.mark.parametrize(
    ("ignored", "expected"),
    [
        (("--a",), "serve line: flags that decide no kernel, ignored: `--a`"),
        (("--a", "--a", "--b"), "serve line: flags that decide no kernel, ignored: `--a`, `--b`"),
        (("--" + "x" * 500,), "serve line: flags that decide no kernel, ignored: `--" + "x" * 35 + "...`"),
    ],
)
def test_ignored_note(ignored: tuple[str, ...], expected: str) -> None:
    assert ignored_note(ignored) == expected


@pytest.mark.parametrize("engine_flags", ["vllm", "sglang"])
@SETTINGS
@given(data=st.data())
def test_the_runs_read_as_one_parse(engine_flags: str, data: st.DataObject) -> None:
    """Property: for lines of known and unknown flags, values (negative numbers too), glued
    ``=`` forms, store-true switches, stray words and ``--``, the runs give what one argparse call
    gives (values, a later flag winning, and the unread tokens in order)."""
    parser = serve_parser(spec(engine_flags).flags, f"{engine_flags} serve")
    names = sorted(parser._option_string_actions)
    token = st.one_of(
        st.sampled_from(names),
        st.sampled_from(names).map(lambda n: n + "=2"),
        st.sampled_from(["--foo", "--bar=1", "-x", "-t", "--", "-5", "1", "2", "auto", "fp8", "a b", "-1.5"]),
    )
    tokens = data.draw(st.lists(token, max_size=3 * _FLAGS_PER_PARSE))
    try:
        ns, whole_unknown = parser.parse_known_args(tokens)
        whole: Any = ({k: v for k, v in vars(ns).items() if v is not None}, whole_unknown)
    except Exception as exc:
        whole = type(exc)
    try:
        runs: Any = _parse_known(parser, tokens)
    except Exception as exc:
        runs = type(exc)
    assert runs == whole


def test_the_run_size_is_the_modules() -> None:
    assert _line._FLAGS_PER_PARSE >= 16


def test_a_large_rule_file_with_an_error_per_rule_compares_each_finding_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a 7,000-rule policy took 10 s uncached: each finding was looked up in a list of all before it
    from kernelpolicy.dsl.loader import load_policy
    from kernelpolicy.errors import Diagnostic, PolicyError

    n = 2_000
    f = tmp_path / "op.yaml"
    f.write_text(
        "rules:\n" + "".join(f"  - {{id: r{i}, when: {{model.type: m{i}}}, deny: marlin}}\n" for i in range(n)),
        encoding="utf-8",
    )
    calls = [0]
    real = Diagnostic.__eq__

    def counted(self: Diagnostic, other: object) -> bool:
        calls[0] += 1
        return real(self, other)

    monkeypatch.setattr(Diagnostic, "__eq__", counted)
    with pytest.raises(PolicyError) as exc:
        load_policy([str(f)], environ=False)
    assert len(exc.value.diagnostics) >= n  # every rule's missing severity is said
    assert calls[0] <= 4 * n  # linear (a list scan made it n * n / 2 = 2,000,000)


def test_fmt_of_a_laid_out_file_is_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `fmt --check` of 3,000 rules took 13.5 s: two layout passes and three data comparisons
    from kernelpolicy.tools import fmt

    body = "".join(
        f"  - id: r{i}\n    when: {{model.type: m{i}}}\n    deny: marlin\n    severity: perf\n" for i in range(50)
    )
    text = fmt.format_text("rules:\n" + body)
    passes: list[int] = []
    same: list[int] = []
    real_layout, real_same = fmt._layout, fmt._same_data
    monkeypatch.setattr(fmt, "_layout", lambda *a: passes.append(1) or real_layout(*a))
    monkeypatch.setattr(fmt, "_same_data", lambda *a: same.append(1) or real_same(*a))
    assert fmt.format_text(text) == text
    assert len(passes) == 1 and not same


def test_a_long_sglang_line_reads_its_abbreviations_in_linear_time() -> None:
    """SGLang's abbreviations are looked up per unknown token (`--foo` is a prefix of no option):
    16,000 of them before `--tp 8` read in well under a second, as the vLLM line does."""
    import time

    start = time.perf_counter()
    s = _parse_serve(["python3", "-m", "sglang.launch_server", "--model", "m", *["--foo", "1"] * 16_000, "--tp", "8"])
    assert time.perf_counter() - start < 2.0
    assert s.values["tp_size"] == 8 and len(s.notes) == 1 and "and 0 more" not in s.notes[0]
