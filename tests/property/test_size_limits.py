"""The size contract (round three): a rule or policy file of any shape up to the documented
limit is answered (loaded, or refused with diagnostics), never an internal error; past the limit
it is refused before it is parsed. Shapes: one long line, deep, wide, many small entries."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelpolicy.dsl._source import MAX_BYTES
from kernelpolicy.dsl.loader import SourceFile, discover, load_files
from kernelpolicy.errors import PolicyError

from .strategies import SETTINGS


def _rule(i: int) -> str:
    return f"  - {{id: op-{i}, when: {{gpu.sm: sm90}}, deny: marlin, severity: perf, because: x{i}}}\n"


def _shape(kind: str, n: int) -> str:
    if kind == "many":
        return "rules:\n" + "".join(_rule(i) for i in range(n))
    if kind == "one-line":
        return "rules: [" + ", ".join(_rule(i).strip()[2:] for i in range(n)) + "]\n"
    if kind == "deep":
        cond = "{gpu.sm: sm90}"
        for i in range(n):
            cond = f"{{{'all' if i % 2 else 'any'}: [{cond}]}}"
        return f"rules:\n  - {{id: op-deep, when: {cond}, deny: marlin, severity: perf, because: x}}\n"
    # wide: one condition testing many keys, most unknown to the vocabulary
    keys = ", ".join(f"k{i}: {i}" for i in range(n))
    return f"rules:\n  - {{id: op-wide, when: {{{keys}}}, deny: marlin, severity: perf, because: x}}\n"


def _load(text: str) -> object:
    with tempfile.TemporaryDirectory(prefix="kp-size-") as tmp:
        p = Path(tmp) / "op.yaml"
        p.write_text(text, encoding="utf-8")
        files = [*discover(environ=False), SourceFile(p, "policy/op.yaml", "policy")]
        try:
            return load_files(files)
        except PolicyError as exc:
            return exc


@settings(SETTINGS, max_examples=max(8, SETTINGS.max_examples // 5))
@given(kind=st.sampled_from(["many", "one-line", "deep", "wide"]), n=st.integers(1, 400))
def test_any_shape_is_answered(kind: str, n: int) -> None:
    text = _shape(kind, n)
    assert len(text.encode()) <= MAX_BYTES
    result = _load(text)
    assert result is not None  # a Policy, or PolicyError with its diagnostics: nothing else escapes
    if isinstance(result, PolicyError):
        assert result.diagnostics


@pytest.mark.parametrize("kind", ["many", "one-line"])
def test_past_the_limit_is_refused_before_parsing(kind: str) -> None:
    text = _shape(kind, 1)
    text += "#" * (MAX_BYTES + 1 - len(text.encode())) + "\n"
    result = _load(text)
    assert isinstance(result, PolicyError)
    assert any(d.code == "too-large" for d in result.diagnostics)
