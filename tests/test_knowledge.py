"""The rules' version bounds against the scanned releases: ``check``'s `unknown-release` warning
and ``kernelpolicy knowledge stale`` (rules whose cited fix shipped in a release they do not bound)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpolicy.analysis.fixes import CitedFix, cited_fixes, stale_bounds
from kernelpolicy.analysis.releases import known_releases, unknown_release
from kernelpolicy.cli import main
from kernelpolicy.dsl.loader import load_policy

CATALOG = Path(__file__).parent / "check" / "base" / "catalog.yaml"


def _policy(tmp_path: Path, body: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "rules.yaml"
    f.write_text(body, encoding="utf-8")
    return load_policy([CATALOG, f], shipped=False, default_policy=False, environ=False)


def test_known_releases_are_the_published_scanned_and_pinned_ones() -> None:
    known = known_releases()
    assert known["vllm"][-1].public == "0.34.0" and any(v.public == "0.21.0" for v in known["vllm"])
    # vLLM 0.34.0 pins flashinfer-python 0.7.3, which the index here lacks: the pin makes it known
    assert any(v.public == "0.7.3" for v in known["flashinfer-python"])
    assert any(v.public == "0.5.12.post1" for v in known["sglang"])


@pytest.mark.parametrize(
    ("package", "written", "why"),
    [
        ("vllm", "0.21.1", "vllm 0.21.1 was never published (the 0.21 series: 0.21.0)"),
        ("vllm", "0.21.0", None),
        ("vllm", "0.26", None),  # a series with releases
        ("vllm", "0.35", None),  # after every known release: the next one
        ("vllm", "0.40.1", None),
        ("sglang", "0.5.12.post1", None),
        ("sglang", "0.5.12.post2", "sglang 0.5.12.post2 was never published"),
        ("flashinfer-python", "0.7.3", None),
        ("flashinfer-python", "0.6.19", "flashinfer-python 0.6.19 was never published"),
    ],
)
def test_a_bound_names_a_known_release_or_one_after_them(package: str, written: str, why: str | None) -> None:
    got = unknown_release(package, written)
    assert got == why if why is None else (got is not None and got.startswith(why))


def test_the_shipped_rules_name_only_known_releases_but_the_audited_one() -> None:
    from kernelpolicy.analysis.releases import unknown_release_bounds

    found = [(f.rule, f.field) for f in unknown_release_bounds(load_policy(environ=False))]
    # the rule-content branch of issue #24 bounds it at 0.22.0; until it lands, this is the one finding
    assert found in ([], [("cutlass-fp8-tensor-sm121-arch-guard", "require")])


def test_cited_fixes_are_read_from_the_prose() -> None:
    got = cited_fixes(
        "NaN windows; fixed in FlashInfer 0.6.16, whose collective is new",
        "fixed by vLLM PR 43223 (in 0.26 the routing is renamed); fixed in SGLang 0.5.17.post1",
    )
    assert got == [
        CitedFix("flashinfer-python", "flashinfer.version", "0.6.16"),
        CitedFix("vllm", "vllm.version", "0.26"),
        CitedFix("sglang", "sglang.version", "0.5.17.post1"),
    ]
    assert cited_fixes("no fix yet", None) == []


_RULE = """
rules:
  - id: triton-sglang-moe-bug
    when: {{deploy.engine: sglang, gpu.family: sm90{bound}}}
    paths: [moe]
    deny: triton
    severity: accuracy
    because: wrong output
    help: fixed in SGLang 0.5.17
    refs: [test#1]
{until}"""


@pytest.mark.parametrize(
    ("bound", "until", "stale"),
    [
        ("", "", True),  # no bound: it acts on 0.5.17 to 0.5.23
        (', sglang.version: "<0.5.17"', "", False),
        ("", '    until: {sglang.version: ">=0.5.17"}\n', False),
        (', sglang.version: "<0.5.19"', "", True),  # bounded, but past the fix
    ],
)
def test_a_rule_acting_on_the_release_with_its_fix_is_stale(
    tmp_path: Path, bound: str, until: str, stale: bool
) -> None:
    found = stale_bounds(_policy(tmp_path, _RULE.format(bound=bound, until=until)))
    assert [s.rule for s in found] == (["triton-sglang-moe-bug"] if stale else [])
    if stale:
        assert found[0].shipped_in[0].startswith("sglang 0.5.17")
        assert "cites a fix in sglang 0.5.17" in found[0].message()


def test_a_pinned_fix_is_bounded_through_the_engine_releases_that_pin_it(tmp_path: Path) -> None:
    # vLLM 0.27.1 is the first scanned release to pin FlashInfer 0.6.16 or later; a rule bounded at
    # vLLM < 0.27 bounds the fix though it never names FlashInfer
    rule = """
rules:
  - id: marlin-nan-window
    when: {{gpu.family: sm90, vllm.version: "{bound}"}}
    paths: [moe]
    deny: marlin
    severity: accuracy
    because: NaN
    help: fixed in FlashInfer 0.6.16
    refs: [test#1]
"""
    assert stale_bounds(_policy(tmp_path, rule.format(bound="<0.27"))) == []
    found = stale_bounds(_policy(tmp_path, rule.format(bound="<0.30")))
    assert [s.shipped_in for s in found] == [("vllm 0.27.1-0.29.0",)]


def test_a_fix_in_no_scanned_release_is_not_listed(tmp_path: Path) -> None:
    rule = _RULE.format(bound="", until="").replace("SGLang 0.5.17", "SGLang 0.5.30")
    assert stale_bounds(_policy(tmp_path, rule)) == []


def test_the_command_on_the_shipped_rules_lists_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "stale"]) == 0
    assert capsys.readouterr().out.startswith("0 stale of ")
    assert main(["knowledge", "stale", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "kernelpolicy.stale/1" and doc["stale"] == []


def test_the_command_lists_a_stale_rule_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(_RULE.format(bound="", until="").replace("rules:", "rules:", 1), encoding="utf-8")
    assert main(["knowledge", "stale", "--policy", str(f), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(s["rule"], s["package"], s["fixed_in"]) for s in doc["stale"]] == [
        ("triton-sglang-moe-bug", "sglang", "0.5.17")
    ]


_PINS = """
implies:
  - id: a-pins
    when: {{deploy.engine: sglang, sglang.version: ">=0.5.13,<0.5.15"}}
    set: {{flashinfer.version: "0.6.12"}}
  - id: b-pins
    when: {{deploy.engine: sglang, sglang.version: "{b}"}}
    set: {{flashinfer.version: "0.6.14"}}
  - id: c-pins
    when: {{vllm.version: ">=0.26,<0.27"}}
    unless: {{deploy.engine: sglang}}
    set: {{flashinfer.version: "0.6.14.post1"}}
"""


@pytest.mark.parametrize(("b", "conflict"), [(">=0.5.15,<0.5.16", False), (">=0.5.14,<0.5.16", True)])
def test_implications_that_never_fire_together_are_not_a_conflict(tmp_path: Path, b: str, conflict: bool) -> None:
    from kernelpolicy.analysis.domain import build_domain
    from kernelpolicy.analysis.implications import implication_conflicts

    policy = _policy(tmp_path, _PINS.format(b=b))
    found = implication_conflicts(policy, build_domain(policy))
    assert len(found) == (1 if conflict else 0)
    assert all("a-pins" in f.message + (f.help or "") and "b-pins" in f.message + (f.help or "") for f in found)
    # `c-pins` never fires beside the others: its `unless` excludes the engine they need
    assert not any("c-pins" in f.message + (f.help or "") for f in found)
