"""Fuzzing the loader: whatever a rule file holds, loading it ends in a Policy or a PolicyError.

Malformed YAML text, random and mutated rule structures (wrong types, unknown keys, bad
specifiers), deep nesting, huge files, anchors/aliases and tags such as ``!!python/object``
always end in a :class:`PolicyError` whose diagnostics carry the file and, where the problem
has a place, a line and column >= 1; never another exception, never code execution.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kernelpolicy.dsl.loader import SourceFile, load_files
from kernelpolicy.errors import PolicyError
from kernelpolicy.policy import Policy

from .strategies import FUZZ_SETTINGS, SETTINGS, conditions, rule_dicts

pytestmark = pytest.mark.property

CATALOG = {
    "backends": [
        {"backend": "deep_gemm", "paths": ["dense", "moe"], "warmup": True},
        {"backend": "triton", "paths": ["dense", "moe"]},
        {"backend": "cutlass", "paths": ["dense"]},
        {"backend": "linear", "paths": ["router"]},
    ],
    "engine": {"name": "vllm", "env": []},
}
#: Diagnostics about a whole file (too large, unreadable) have no line to point at.
PLACELESS = frozenset({"too-large", "io"})


def load_text(content: str | bytes, *, layer: str = "policy") -> Policy | PolicyError:
    """Load a valid catalog and *content* as ``fuzz.yaml``; the result or the PolicyError."""
    with tempfile.TemporaryDirectory(prefix="kp-fuzz-") as tmp:
        cat = Path(tmp) / "catalog.yaml"
        cat.write_text(yaml.safe_dump(CATALOG))
        p = Path(tmp) / "fuzz.yaml"
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        try:
            return load_files([SourceFile(cat, "catalog.yaml", "shipped"), SourceFile(p, "fuzz.yaml", layer)])  # type: ignore[arg-type]
        except PolicyError as exc:
            check_error(exc)
            return exc


def check_error(exc: PolicyError) -> None:
    assert exc.diagnostics and exc.errors, "a PolicyError with no error in it"
    for d in exc.diagnostics:
        assert d.file == "fuzz.yaml", d
        assert d.message
        if d.code not in PLACELESS:
            assert d.line >= 1 and d.column >= 1, f"diagnostic without a place: {d.one_line()}"
    str(exc)
    exc.render()


# --------------------------------------------------------------------------- strategies

TOKENS = (
    "rules:",
    "backends:",
    "order:",
    "implies:",
    "models:",
    "gpus:",
    "engine:",
    "bogus:",
    "- id: r",
    "  - id: x",
    "deny: triton",
    "use: triton",
    "prefer: [triton]",
    "paths: [dense]",
    "paths: warmup",
    "severity: crash",
    "severity: fatal",
    "because: x",
    "refs: [a#1]",
    "when: {gpu.family: sm120}",
    "when: {triton.version: '>=3.x'}",
    "when: {model.hidden_size: '>= big'}",
    "when: {all: []}",
    "when: {not: 3}",
    "when: [1, 2]",
    "until: {vllm.version: 0.24}",
    "require: {gpu.famly: sm90}",
    "backend: deep_gemm",
    "requires: {quant.scheme: fp9}",
    ":",
    "- ",
    "  ",
    "    ",
    "{",
    "}",
    "[",
    "]",
    "'",
    '"',
    "&a",
    "*a",
    "!!str",
    "!!int",
    "? ",
    "---",
    "...",
    "%YAML 1.1",
    "# c",
    "\t",
    "12.10",
    "yes",
    "~",
    "null",
    "0x1F",
    "1e3",
    "- - -",
)
# Control characters are drawn too: a character YAML refuses is reported at its line.
_PRINTABLE = st.characters(blacklist_categories=("Cs",), blacklist_characters="\ufeff\x85\u2028\u2029")


@st.composite
def yaml_texts(draw: st.DrawFn) -> str:
    lines = draw(
        st.lists(
            st.one_of(
                st.lists(st.sampled_from(TOKENS), min_size=1, max_size=4).map(" ".join),
                st.text(_PRINTABLE, max_size=30),
            ),
            max_size=25,
        )
    )
    return "\n".join(lines)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(_PRINTABLE, max_size=12),
    st.sampled_from(["sm120", "triton", "deep_gemm", ">=3.6", ">=x", "== 4096", "dense", "warmup", "crash", "a#1"]),
)
JUNK = st.recursive(
    _SCALARS,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(
            st.one_of(
                st.text(_PRINTABLE, max_size=8), st.sampled_from(["id", "when", "paths", "all", "not", "gpu.family"])
            ),
            kids,
            max_size=4,
        ),
    ),
    max_leaves=12,
)
RULE_FIELDS = (
    "id",
    "when",
    "deny",
    "prefer",
    "require",
    "use",
    "backend",
    "paths",
    "overrides",
    "severity",
    "because",
    "refs",
    "until",
    "help",
)


@st.composite
def mutated_rules(draw: st.DrawFn) -> dict[str, Any]:
    """A valid rule with one to three fields replaced by junk, dropped, or added."""
    rule = draw(rule_dicts(CATALOG, "m0", kinds=("deny", "require", "prefer")))
    assert rule is not None
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(("replace", "drop", "add", "condition")))
        field = draw(st.sampled_from((*RULE_FIELDS, "bogus", "sevrity")))
        if how == "drop":
            rule.pop(field, None)
        elif how == "condition":
            rule[draw(st.sampled_from(("when", "until", "require")))] = draw(st.one_of(conditions(), JUNK))
        else:
            rule[field] = draw(JUNK)
    return rule


@st.composite
def structures(draw: st.DrawFn) -> Any:
    """A whole file's data: sections with mutated rules, junk entries, or junk instead of sections."""
    if not draw(st.integers(0, 5)):
        return draw(JUNK)
    data: dict[str, Any] = {}
    for section in draw(
        st.lists(
            st.sampled_from(("rules", "backends", "order", "implies", "models", "gpus", "bogus")),
            max_size=3,
            unique=True,
        )
    ):
        if section == "rules":
            data[section] = draw(st.lists(st.one_of(mutated_rules(), JUNK), max_size=4))
        else:
            data[section] = draw(
                st.one_of(
                    JUNK,
                    st.lists(
                        st.dictionaries(
                            st.sampled_from(
                                (
                                    "id",
                                    "backend",
                                    "path",
                                    "paths",
                                    "when",
                                    "set",
                                    "backends",
                                    "name",
                                    "sm",
                                    "config",
                                    "source",
                                    "requires",
                                )
                            ),
                            JUNK,
                            max_size=5,
                        ),
                        max_size=3,
                    ),
                )
            )
    if draw(st.booleans()):
        # engine env names stay valid names: see test_invalid_env_name_is_a_policy_error
        env = st.fixed_dictionaries(
            {"name": st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), "value": JUNK, "because": JUNK},
            optional={"deny": JUNK, "use": JUNK, "paths": JUNK},
        )
        data["engine"] = draw(
            st.fixed_dictionaries(
                {"name": JUNK}, optional={"env": st.lists(env, max_size=3), "aliases": JUNK, "moe_flag": JUNK}
            )
        )
    return data


# --------------------------------------------------------------------------- properties


class TestMalformedInput:
    """Malformed YAML text and malformed rule structures end in a Policy or a PolicyError whose
    every diagnostic names the file and (where it has a place) a line and column >= 1; never
    another exception."""

    @FUZZ_SETTINGS
    @given(yaml_texts(), st.sampled_from(["shipped", "policy"]))
    def test_random_text(self, text: str, layer: str) -> None:
        load_text(text, layer=layer)

    @FUZZ_SETTINGS
    @given(structures(), st.sampled_from(["shipped", "policy"]))
    def test_random_structures(self, data: Any, layer: str) -> None:
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        load_text(text, layer=layer)

    @FUZZ_SETTINGS
    @given(st.lists(mutated_rules(), min_size=1, max_size=3))
    def test_mutated_rules_point_at_their_line(self, rules: list[dict[str, Any]]) -> None:
        text = yaml.safe_dump({"rules": rules}, sort_keys=False)
        out = load_text(text)
        if isinstance(out, PolicyError):
            last = len(text.splitlines())
            assert all(1 <= d.line <= last for d in out.errors)

    @SETTINGS
    @given(st.integers(65, 4000), st.sampled_from(["[", "{a: ", "- "]))
    def test_deep_nesting(self, depth: int, opener: str) -> None:
        closer = {"[": "]", "{a: ": "}", "- ": ""}[opener]
        text = "rules:\n  " + opener * depth + "1" + closer * depth
        out = load_text(text)
        assert isinstance(out, PolicyError)
        assert "nesting" in str(out) or "YAML" in str(out)

    def test_bad_utf8(self) -> None:
        out = load_text(b"rules: [\xff\xfe]\n")
        assert isinstance(out, PolicyError) and out.errors[0].code == "io"


TAGS = (
    "!!python/object/apply:os.system [{cmd}]",
    "!!python/object/apply:subprocess.check_call [[sh, -c, {cmd}]]",
    "!!python/object/new:os.system [{cmd}]",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/tuple [1, 2]",
    "!!binary aGVsbG8=",
    "!!set {{a: null}}",
    "!!timestamp 2001-12-14",
    "!!omap [a: 1]",
    "!custom {cmd}",
    "!<tag:yaml.org,2002:python/object/apply:os.system> [{cmd}]",
)


class TestTagsNeverRun:
    """Tags such as ``!!python/object/apply`` never construct objects or run code: the file is
    refused with a PolicyError at the tag's line."""

    @SETTINGS
    @given(
        st.sampled_from(TAGS),
        st.sampled_from(
            ["rules: {tag}", "rules:\n  - id: {tag}", "{tag}", "backends:\n  - backend: triton\n    paths: {tag}"]
        ),
    )
    def test_tags(self, tag: str, where: str) -> None:
        with tempfile.TemporaryDirectory(prefix="kp-sentinel-") as tmp:
            sentinel = Path(tmp) / "ran"
            cmd = f"'touch {sentinel}'"
            out = load_text(where.format(tag=tag.format(cmd=cmd)))
            assert isinstance(out, PolicyError)
            assert not sentinel.exists(), "a YAML tag ran code"
            assert any("tag" in d.message for d in out.errors), out.render()


def _laughs(levels: int, width: int) -> str:
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels):
        refs = ", ".join(f"*a{i - 1}" for _ in range(width))
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + f"\nrules: *a{levels - 1}\n"


class TestBombsAndSizes:
    """Alias bombs (billion laughs) and files over the size limit are refused, quickly."""

    @SETTINGS
    @given(st.integers(2, 12), st.integers(2, 10))
    def test_alias_bombs(self, levels: int, width: int) -> None:
        start = time.perf_counter()
        out = load_text(_laughs(levels, width))
        assert isinstance(out, PolicyError)
        assert "aliases" in str(out)
        assert time.perf_counter() - start < 2.0

    def test_single_alias_refused(self) -> None:
        out = load_text(
            "x: &r {gpu.family: sm120}\nrules:\n  - {id: a, when: *r, deny: triton, severity: crash, because: b, refs: [c#1]}\n"
        )
        assert isinstance(out, PolicyError) and "aliases" in str(out)

    @SETTINGS
    @given(st.integers(1_000_001, 1_300_000), st.sampled_from(["#", "rules: []\n#", "x"]))
    def test_over_one_megabyte(self, size: int, prefix: str) -> None:
        text = prefix + "a" * (size - len(prefix))
        out = load_text(text)
        assert isinstance(out, PolicyError)
        assert [d.code for d in out.errors] == ["too-large"]

    def test_multibyte_size_counts_bytes(self) -> None:
        out = load_text("# " + "é" * 500_001)  # 1,000,004 bytes in 500,003 characters
        assert isinstance(out, PolicyError) and out.errors[0].code == "too-large"

    def test_just_under_the_limit_loads(self) -> None:
        text = "rules: []\n# " + "a" * (1_000_000 - 13) + "\n"
        assert len(text.encode()) <= 1_000_000
        assert isinstance(load_text(text), Policy)


class TestFoundBugs:
    """Loader bugs this suite found, kept as regression tests."""

    def test_control_character_has_a_place(self) -> None:
        load_text("rules: []\n\x07\n")

    def test_invalid_env_name_is_a_policy_error(self) -> None:
        text = "engine:\n  name: vllm\n  env:\n    - {name: bad-name, value: '1', deny: triton, because: x}\n"
        assert isinstance(load_text(text, layer="shipped"), PolicyError)
