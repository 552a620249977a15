"""The rules' version bounds against the scanned releases: ``check``'s `unknown-release` warning
and ``kernelpolicy knowledge stale`` (rules whose cited fix shipped in a release they do not bound)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from kernelpolicy.analysis.fixes import CitedFix, cited_fixes, contradicted_windows, stale_bounds
from kernelpolicy.analysis.releases import known_releases, unknown_release
from kernelpolicy.cli import main
from kernelpolicy.dsl.loader import load_policy
from kernelpolicy.releases.packages import CONTENTS_FILE

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


# -- windows checked against what shipped (releases/packages/contents.json)

_HOPPER = "flashinfer/data/csrc/nv_internal/tensorrt_llm/cutlass_extensions/include/cutlass_extensions/gemm/collective/sm90_mma_array_tma_gmma_rs_warpspecialized_mixed_input_.hpp"
_WINDOW_RULE = """
rules:
  - id: hopper-race-as-audited
    when: {{gpu.sm: sm90, quant.moe_scheme: mxfp4}}
    backend: flashinfer_cutlass
    paths: [moe]
    require:
      not: {{flashinfer.version: "{window}"}}
    severity: accuracy
    because: the W4A16 collective races on its TMA descriptor
    help: fixed in FlashInfer {fixed}
    refs: [flashinfer-ai/flashinfer#5438]
    fix:
      package: flashinfer-python
      file: {file}
      {kind}: {pattern}
"""


def _window(tmp_path: Path, window: str, fixed: str = "0.6.16", **kw: str) -> Path:
    f = tmp_path / "policy.yaml"
    args = {"file": _HOPPER, "kind": "contains", "pattern": "RequiresPrebuiltTensormapAcquireOnBatchChange"} | kw
    f.write_text(_WINDOW_RULE.format(window=window, fixed=fixed, **args), encoding="utf-8")
    return f


def test_the_audited_window_is_contradicted_by_the_released_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the audit of issue #35: the rule trusted "fixed in 0.6.16", but the release branch reverted the
    # rewritten collective: 0.6.16.post3, .post4 and 0.6.17 carry the old header (read from the wheels)
    f = _window(tmp_path, ">=0.6.12,<0.6.16")
    assert main(["knowledge", "stale", "--policy", str(f), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    [c] = doc["contradicted"]
    assert (c["rule"], c["package"], c["fixed_in"]) == ("hopper-race-as-audited", "flashinfer-python", "0.6.16")
    assert c["lacking"] == ["0.6.16.post3", "0.6.16.post4", "0.6.17"] and c["acting"] == c["early"] == []
    assert doc["stale"] == []  # vLLM 0.27.1's pin (0.6.16.post3) does not bring the fix: not a stale bound
    assert main(["knowledge", "stale", "--policy", str(f)]) == 1
    out = capsys.readouterr().out
    assert "treats 0.6.16.post3, 0.6.16.post4, 0.6.17 as fixed, but their code lacks the fix" in out
    shipped = sum(1 for r in load_policy(environ=False).rules if r.fix is not None)
    assert f"1 of {shipped + 1} windows contradicted by the released code\n" in out


def test_the_corrected_window_matches_the_released_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the shipped rule's window (0.6.16.post3-0.6.17 added) is what the wheels say: none contradicted
    assert main(["knowledge", "stale", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["contradicted"] == [] and doc["checked_against_releases"] >= 1
    # a window past the fix acts on releases that have it; a citation after the fix is early
    f = _window(tmp_path, ">=0.6.12,<0.7")
    [c] = contradicted_windows(load_policy([f], environ=False))
    assert c.acting[:3] == ("0.6.16", "0.6.16.post1", "0.6.16.post2") and "0.6.18" in c.acting
    f = _window(tmp_path, ">=0.6.12,<0.6.16", fixed="0.6.18")
    [c] = contradicted_windows(load_policy([f], environ=False))
    assert c.early == ("0.6.16", "0.6.16.post1", "0.6.16.post2")
    assert "cites flashinfer-python 0.6.18, but 0.6.16, 0.6.16.post1, 0.6.16.post2 already have the fix" in c.message()


def test_a_fix_the_table_has_not_scanned_is_a_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _window(tmp_path, ">=0.6.12,<0.6.16", pattern="SomethingNoScanLookedFor")
    assert main(["knowledge", "stale", "--policy", str(f), "--json"]) == 1
    [c] = json.loads(capsys.readouterr().out)["contradicted"]
    assert c["unscanned"] is True and "run `python -m kernelpolicy.releases.packages._scan`" in c["message"]


@pytest.mark.parametrize(
    ("fix", "error"),
    [
        ("contains: a\n      matches: b", "a fix names exactly one signature"),
        ("file2: x", "unknown field `file2`"),
        ('matches: "b("', "`matches` is not a regular expression"),
    ],
)
def test_a_malformed_fix_is_one_line_naming_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fix: str, error: str
) -> None:
    f = tmp_path / "policy.yaml"
    body = _WINDOW_RULE.format(window="<0.6.16", fixed="0.6.16", file="a.py", kind="contains", pattern="x")
    f.write_text(body.replace("contains: x", fix), encoding="utf-8")
    assert main(["knowledge", "stale", "--policy", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and error in err[0] and "(rule `hopper-race-as-audited`)" in err[0]
    assert err[0].startswith(f"kernelpolicy: {f}:")


def test_the_release_table_covers_every_shipped_fix_and_every_scanned_release() -> None:
    """CI compares against the checked-in table, without the network: a shipped rule's `fix` the
    table lacks fails here (regenerate: `python -m kernelpolicy.releases.packages._scan`)."""
    from kernelpolicy.releases.packages import scanned_contents
    from kernelpolicy.releases.packages._scan import oldest_scanned

    policy = load_policy(environ=False)
    table = scanned_contents()
    wanted = {ev.key for r in policy.rules for ev in (r.fix or ())}
    assert wanted and wanted <= set(table), "regenerate: python -m kernelpolicy.releases.packages._scan"
    doc = json.loads(CONTENTS_FILE.read_text(encoding="utf-8"))
    for key in wanted:
        seen = table[key]
        listed = doc["packages"][seen.evidence.package]
        assert list(seen.releases) == listed  # each scanned release in exactly one group
        floor = oldest_scanned(seen.evidence.package)
        assert floor is not None and Version(listed[0]) == floor  # flashinfer-python from 0.6.0
    # post releases are scanned: the revert lives in them
    assert {"0.6.16.post3", "0.6.16.post4", "0.7.0.post1"} <= set(doc["packages"]["flashinfer-python"])


def test_the_checked_in_table_is_what_the_cached_archives_hold(tmp_path: Path) -> None:
    """Re-scan the cached archives (no download) and compare; skipped where the cache lacks them."""
    from kernelpolicy.releases.packages._scan import cached_archives
    from kernelpolicy.releases.packages._scan import main as scan_main

    doc = json.loads(CONTENTS_FILE.read_text(encoding="utf-8"))
    for package, releases in doc["packages"].items():
        missing = sorted(set(releases) - set(cached_archives(package)), key=Version)
        if missing:
            pytest.skip(
                f"{package} {', '.join(missing[:3])} not cached (python -m kernelpolicy.releases.packages._scan)"
            )
    out = tmp_path / "contents.json"
    out.write_text(CONTENTS_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    assert scan_main(["--offline", "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == doc


def test_the_scanner_reads_wheels_and_source_archives(tmp_path: Path) -> None:
    import io
    import tarfile
    import zipfile

    from kernelpolicy.policy import FixEvidence
    from kernelpolicy.releases.packages._scan import archive_member, scan, shows

    src = b"class Runner:\n    def autotune(self):\n        pass\n\nTILES = [128, 256]\n"
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("pkg/moe.py", src)
    sdist = tmp_path / "pkg-0.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        old = b"class Runner:\n    pass\nTILES = [128, 192, 256]\n"
        info = tarfile.TarInfo("pkg-0.9/pkg/moe.py")
        info.size = len(old)
        t.addfile(info, io.BytesIO(old))
    assert archive_member(whl, "pkg/moe.py") == src and archive_member(whl, "pkg/none.py") is None
    assert archive_member(sdist, "pkg/moe.py") is not None
    sym = FixEvidence("pkg", "pkg/moe.py", "symbol", "Runner.autotune")
    rx = FixEvidence("pkg", "pkg/moe.py", "matches", r"^TILES = \[128, 256\]")
    gone = FixEvidence("pkg", "pkg/gone.py", "contains", "x")
    assert shows(sym, src) and shows(rx, src) and not shows(sym, b"class Runner:\n    pass\n")
    archives = {"0.9": sdist, "1.0": whl}
    doc = scan([sym, rx, gone], {"pkg": ["0.9", "1.0"]}, lambda _p, v: archives[v])
    got = {(e["kind"], e["pattern"]): (e["has"], e["lacks"], e["no_file"]) for e in doc["fixes"]}
    assert got[("symbol", "Runner.autotune")] == (["1.0"], ["0.9"], [])
    assert got[("matches", r"^TILES = \[128, 256\]")] == (["1.0"], ["0.9"], [])
    assert got[("contains", "x")] == ([], [], ["0.9", "1.0"])


# -- SGLang's pins as implications (rules/implies/sglang_releases.yaml), from one generator with vLLM's

_ROOT = Path(__file__).resolve().parents[1]
_SGLANG_RELEASES = _ROOT / "src" / "kernelpolicy" / "releases" / "sglang" / "releases.json"


def test_the_sglang_pin_file_is_in_sync_with_the_release_data() -> None:
    from kernelpolicy.releases.packages.pins import SGLANG_GENERATED, sglang_generated_files

    want = sglang_generated_files(_ROOT)[_ROOT / SGLANG_GENERATED]
    have = (_ROOT / SGLANG_GENERATED).read_text(encoding="utf-8")
    assert have == want, f"{SGLANG_GENERATED} is out of date: run `python -m kernelpolicy._docs`"


def test_every_sglang_release_implies_what_its_wheel_pins(tmp_path: Path) -> None:
    from kernelpolicy import resolve
    from kernelpolicy.facts.record import Facts

    policy = load_policy(environ=False)
    records = json.loads(_SGLANG_RELEASES.read_text(encoding="utf-8"))["releases"]
    for version, record in records.items():
        pins = record["requires"]
        d = resolve(Facts.from_values({"deploy.engine": "sglang", "sglang.version": version, "gpu.sm": "sm90"}), policy)
        assert d.facts.values["flashinfer.version"] == pins["flashinfer-python"], version
        assert d.facts.values["torch.version"] == pins["torch"], version
        assert d.facts.values["deep_gemm.version"] == pins["sgl-deep-gemm"], version
        assert d.facts.values["deep_gemm.dist"] == "sgl-deep-gemm", version
        assert d.facts.sources["flashinfer.version"].startswith("implied:sglang-"), version
    # what the user states wins, and vLLM's pins stay off an SGLang deployment (and the reverse)
    stated = {"deploy.engine": "sglang", "sglang.version": "0.5.18", "flashinfer.version": "0.6.18"}
    assert resolve(Facts.from_values(stated), policy).facts.values["flashinfer.version"] == "0.6.18"
    both = {"deploy.engine": "sglang", "sglang.version": "0.5.18", "vllm.version": "0.34.0"}
    assert resolve(Facts.from_values(both), policy).facts.values["flashinfer.version"] == "0.6.17"
    on_vllm = {"deploy.engine": "vllm", "sglang.version": "0.5.18", "vllm.version": "0.34.0"}
    assert resolve(Facts.from_values(on_vllm), policy).facts.values["flashinfer.version"] == "0.7.3"


def test_the_engines_pins_come_from_one_generator() -> None:
    from kernelpolicy.releases.packages.pins import sglang_pin_implications
    from kernelpolicy.releases.vllm.generate import release_implications
    from kernelpolicy.releases.vllm.versions import release_records

    # a post release that moves a pin gets its own window; releases that agree share one
    records = json.loads(_SGLANG_RELEASES.read_text(encoding="utf-8"))["releases"]
    few = {v: records[v] for v in ("0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1")}
    got = {e["id"]: e["when"]["sglang.version"] for e in sglang_pin_implications(few)["implies"]}
    assert got == {
        "sglang-0.5.12-pins": ">=0.5.12,<0.5.12.post1",
        "sglang-0.5.12.post1-pins": ">=0.5.12.post1,<0.5.13",
        "sglang-0.5.13-0.5.13.post1-pins": ">=0.5.13,<0.5.14",
    }
    vllm = [e for e in release_implications(release_records())["implies"] if e["id"].endswith("-pins")]
    assert vllm[-1]["set"] == {"torch.version": "2.14.0", "flashinfer.version": "0.7.3", "cutlass_dsl.version": "4.8.0"}
    assert all(e["because"].endswith("(wheel METADATA `Requires-Dist`)") for e in vllm)


# -- a fix that shows as any of several signatures (`fix:` a list of alternatives)

_ALT_RULE = """
rules:
  - id: fix-moved-on-the-release-branch
    when: {gpu.sm: sm90, quant.moe_scheme: mxfp4}
    backend: flashinfer_cutlass
    paths: [moe]
    require:
      not: {flashinfer.version: "<0.6.16"}
    severity: accuracy
    because: the W4A16 collective races on its TMA descriptor
    help: fixed in FlashInfer 0.6.16
    refs: [flashinfer-ai/flashinfer#5438]
    fix:
FIX
"""
_MAIN = "      - {package: flashinfer-python, file: flashinfer/old.hpp, contains: Fixed}"
_MOVED = "      - {package: flashinfer-python, file: flashinfer/moved.hpp, symbol: Fixed.acquire}"


def _alt_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A release table where the fix shows in one file up to 0.6.16 and from 0.6.18, and the
    release branch carries it in another file (0.6.16.post3, 0.6.17): scanned code, made up."""
    from kernelpolicy.releases import packages

    releases = ["0.6.15.post1", "0.6.16", "0.6.16.post3", "0.6.17", "0.6.18"]
    doc = {
        "generated_by": "test",
        "packages": {"flashinfer-python": releases},
        "fixes": [
            {
                "package": "flashinfer-python",
                "file": "flashinfer/old.hpp",
                "kind": "contains",
                "pattern": "Fixed",
                "has": ["0.6.16", "0.6.18"],
                "lacks": ["0.6.15.post1", "0.6.16.post3", "0.6.17"],
                "no_file": [],
            },
            {
                "package": "flashinfer-python",
                "file": "flashinfer/moved.hpp",
                "kind": "symbol",
                "pattern": "Fixed.acquire",
                "has": ["0.6.16.post3", "0.6.17"],
                "lacks": [],
                "no_file": ["0.6.15.post1", "0.6.16", "0.6.18"],
            },
        ],
    }
    table = tmp_path / "contents.json"
    table.write_text(json.dumps(doc), encoding="utf-8")
    read = packages.scanned_contents
    monkeypatch.setattr(packages, "scanned_contents", lambda path=table: read(path))


def _mine(found: list[Any]) -> list[Any]:
    """The findings of the test's rule (the made-up table has not scanned the shipped rules' fixes)."""
    return [c for c in found if (c["rule"] if isinstance(c, dict) else c.rule) == "fix-moved-on-the-release-branch"]


def test_a_fix_shows_where_any_of_its_alternatives_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpolicy.releases.packages import contents_of_any

    _alt_table(tmp_path, monkeypatch)
    one = tmp_path / "one.yaml"
    one.write_text(_ALT_RULE.replace("FIX", _MAIN), encoding="utf-8")
    both = tmp_path / "both.yaml"
    both.write_text(_ALT_RULE.replace("FIX", f"{_MAIN}\n{_MOVED}"), encoding="utf-8")
    # the first signature alone: the release branch looks reverted
    [c] = _mine(contradicted_windows(load_policy([one], environ=False)))
    assert c.lacking == ("0.6.16.post3", "0.6.17")
    # with the moved file as an alternative, every release from 0.6.16 shows the fix
    policy = load_policy([both], environ=False)
    [rule] = [r for r in policy.rules if r.id == "fix-moved-on-the-release-branch"]
    assert rule.fix is not None and [ev.file for ev in rule.fix] == ["flashinfer/old.hpp", "flashinfer/moved.hpp"]
    seen = contents_of_any(rule.fix)
    assert seen is not None and seen.has == ("0.6.16", "0.6.16.post3", "0.6.17", "0.6.18")
    assert seen.lacks == ("0.6.15.post1",) and seen.no_file == ()
    assert _mine(contradicted_windows(policy)) == []


def test_knowledge_stale_names_every_alternative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _alt_table(tmp_path, monkeypatch)
    f = tmp_path / "policy.yaml"
    f.write_text(_ALT_RULE.replace("FIX", f"{_MAIN}\n{_MOVED}").replace('"<0.6.16"', '"<0.6.17"'), encoding="utf-8")
    assert main(["knowledge", "stale", "--policy", str(f), "--json"]) == 1
    [c] = _mine(json.loads(capsys.readouterr().out)["contradicted"])
    assert (c["rule"], c["package"], c["acting"]) == (
        "fix-moved-on-the-release-branch",
        "flashinfer-python",
        ["0.6.16", "0.6.16.post3"],
    )
    assert "`flashinfer/old.hpp` (contains `Fixed`) or `flashinfer/moved.hpp` (symbol `Fixed.acquire`)" in c["message"]
    # an alternative the table has not scanned is a finding, as a single signature is
    f.write_text(_ALT_RULE.replace("FIX", f"{_MAIN}\n{_MOVED.replace('acquire', 'release')}"), encoding="utf-8")
    assert main(["knowledge", "stale", "--policy", str(f), "--json"]) == 1
    [c] = _mine(json.loads(capsys.readouterr().out)["contradicted"])
    assert c["unscanned"] is True and "`flashinfer/old.hpp` or `flashinfer/moved.hpp`" in c["message"]


@pytest.mark.parametrize(
    ("fix", "error"),
    [
        ("      []", "`fix: []` names no signature"),
        (f"{_MAIN}\n      - {{package: torch, file: torch/x.py, contains: y}}", "these name flashinfer-python, torch"),
        (f"{_MAIN}\n      - {{package: flashinfer-python, file: a.py}}", "a fix names exactly one signature"),
    ],
)
def test_malformed_alternatives_are_one_line_naming_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fix: str, error: str
) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(
        _ALT_RULE.replace("    fix:\nFIX", f"    fix:\n{fix}" if not fix.strip().startswith("[") else "    fix: []"),
        encoding="utf-8",
    )
    assert main(["knowledge", "stale", "--policy", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and error in err[0] and "(rule `fix-moved-on-the-release-branch`)" in err[0], err
