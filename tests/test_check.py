"""``kernelpolicy check``: one deliberately broken file per kind of finding (tests/check/).

Each file loads on top of a tiny catalog (tests/check/base/catalog.yaml) with ``--bare``, so
each run is fast and the finding it must produce is the only one.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.cli import main

HERE = Path(__file__).parent / "check"
BASE = HERE / "base" / "catalog.yaml"

#: file -> (code, level, [(line, column)], text the message or help must contain)
EXPECTED: dict[str, tuple[str, str, list[tuple[int, int]], str]] = {
    "schema-error.yaml": ("schema", "error", [(5, 5)], "did you mean `severity`?"),
    "unknown-fact-key.yaml": ("schema", "error", [(3, 12)], "did you mean `gpu.family`?"),
    "unknown-backend.yaml": ("schema", "error", [(4, 11)], "did you mean `triton`?"),
    "impossible-rule.yaml": ("impossible", "warning", [(3, 5), (9, 5)], "holds for no facts"),
    "dead-rule.yaml": ("dead", "warning", [(4, 5)], "never changes a decision"),
    "shadowed-rule.yaml": ("shadowed", "warning", [(10, 5)], "shadowed by `triton-crashes-on-sm12x`"),
    "contradiction-prefer.yaml": ("contradiction", "error", [(9, 5)], "order the backends of path `moe`"),
    "contradiction-use.yaml": ("contradiction", "error", [(9, 5)], "asks for `marlin`"),
    "duplicate-id.yaml": ("duplicate", "error", [(8, 9)], "duplicate rule id `triton-crashes`"),
    "missing-refs.yaml": ("missing-refs", "warning", [(4, 11)], "without `refs`"),
    "stale-until.yaml": ("stale-rule", "warning", [(14, 5)], "`triton.version` >=3.7 (is `3.7.1`)"),
    "coverage-hole.yaml": ("no-backend", "error", [(5, 5)], "path `moe` has no valid backend in 16 cells"),
    "implies-conflict.yaml": ("implies-conflict", "error", [(6, 5)], "the decision would depend on the order"),
    "unsupported-unused.yaml": ("unsupported-unused", "warning", [(4, 5)], "covers no cell where path `dense`"),
    "unknown-release.yaml": ("unknown-release", "warning", [(6, 5)], "vllm 0.21.1 was never published"),
}


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["check", "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


def files_for(name: str) -> list[str]:
    return [str(HERE / name)] if name == "coverage-hole.yaml" else [str(BASE), str(HERE / name)]


def test_every_broken_file_is_covered() -> None:
    assert {p.name for p in HERE.glob("*.yaml")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_file_gives_its_finding(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, level, places, text = EXPECTED[name]
    rc, out = run_json(capsys, "--bare", *files_for(name))
    found = out["findings"]
    assert {f["code"] for f in found} == {code}, found
    assert sorted((f["line"], f["column"]) for f in found) == places
    assert all(f["file"].endswith(f"tests/check/{name}") for f in found)
    assert all(f["level"] == level for f in found)
    assert any(text in f["message"] + f.get("help", "") for f in found), found
    assert rc == (1 if level == "error" else 0)


def test_the_tiny_catalog_is_clean(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = run_json(capsys, "--bare", "--strict", str(BASE))
    assert (rc, out["errors"], out["warnings"]) == (0, 0, 0)
    assert out["coverage"]["cells"] == 20


def test_strict_fails_on_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", "--bare", str(BASE), str(HERE / "dead-rule.yaml")]
    assert main(args) == 0
    assert main([*args, "--strict"]) == 1
    capsys.readouterr()


def test_all_schema_errors_at_once_with_a_caret(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["schema-error.yaml", "unknown-fact-key.yaml", "unknown-backend.yaml"]
    rc = main(["check", "--bare", str(BASE), *(str(HERE / n) for n in names)])
    text = capsys.readouterr().out
    assert rc == 1
    assert "3 errors" in text
    assert "tests/check/unknown-fact-key.yaml:3:12: error: unknown fact key `gpu.famly`" in text
    assert "    3 |     when: {gpu.famly: sm120}\n      |            ^~~~~~~~~\n" in text
    assert "  = help: did you mean `gpu.family`?" in text


def test_text_output_prints_domain_size_and_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--bare", str(BASE), str(HERE / "stale-until.yaml")]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^verified 180 domain cells over 4 dimensions \(.*\) in \d+\.\d\d s$", text, re.M), text
    assert re.search(r"^2 files: 0 errors, 1 warnings in \d+\.\d\d s$", text, re.M), text
    assert '   14 |     until: {triton.version: ">=3.7"}\n      |     ^~~~~\n' in text


def test_sarif_carries_locations(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", "--sarif", "--bare", str(BASE), str(HERE / "shadowed-rule.yaml")])
    sarif = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert sarif["version"] == "2.1.0"
    (res,) = sarif["runs"][0]["results"]
    assert (res["ruleId"], res["level"]) == ("shadowed", "warning")
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith("tests/check/shadowed-rule.yaml")
    assert (loc["region"]["startLine"], loc["region"]["startColumn"], loc["region"]["endColumn"]) == (10, 5, 9)
    assert {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]} >= {"stale-rule", "no-backend"}


def test_no_coverage_still_finds_stale_and_impossible(capsys: pytest.CaptureFixture[str]) -> None:
    for name, code in (("stale-until.yaml", "stale-rule"), ("impossible-rule.yaml", "impossible")):
        _, out = run_json(capsys, "--bare", "--no-coverage", str(BASE), str(HERE / name))
        assert {f["code"] for f in out["findings"]} == {code}
        assert out["coverage"] == {}


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--bare"]) == 2
    assert main(["check", "--bare", "no/such/file.yaml"]) == 2
    assert "no such file `no/such/file.yaml`" in capsys.readouterr().err


# --------------------------------------------------------------------------- an operator's layer

OPS_HOLE = """\
rules:
  - id: ops-no-triton-on-gb10
    when: {gpu.sm: sm121}
    deny: triton
    paths: [moe]
    severity: accuracy
    because: not validated on our GB10 boxes
    refs: [ops#1]
  - id: ops-no-marlin-on-gb10
    when: {gpu.sm: sm121}
    deny: marlin
    paths: [moe]
    severity: accuracy
    because: not validated on our GB10 boxes
    refs: [ops#1]
"""

OPS_DECLARED = (
    OPS_HOLE
    + """\
unsupported:
  - id: ops-no-moe-on-gb10
    when: {gpu.sm: sm121}
    paths: [moe]
    because: we serve no MoE model on GB10
"""
)


def _ops_check(tmp_path: Path, text: str) -> tuple[str, list[Any]]:
    from kernelpolicy.analysis.checking import check
    from kernelpolicy.dsl.loader import SourceFile

    ops = tmp_path / "ops.yaml"
    ops.write_text(text)
    files = [SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")]
    return str(ops), check(files, subject=[str(ops)], jobs=1).findings


def test_a_hole_an_operator_makes_is_reported_at_the_operators_rule(tmp_path: Path) -> None:
    ops, findings = _ops_check(tmp_path, OPS_HOLE)
    (f,) = findings
    assert (f.code, f.level, f.file) == ("no-backend", "error", ops)
    assert f.line in (3, 10) and f.rule in ("ops-no-triton-on-gb10", "ops-no-marlin-on-gb10")
    assert "path `moe` has no valid backend" in f.message and "sm121" in (f.cell or "")
    assert "narrow its `when`" in (f.help or "") and "`unsupported`" in (f.help or "")


def test_an_unsupported_entry_accepts_the_hole_it_declares(tmp_path: Path) -> None:
    _, findings = _ops_check(tmp_path, OPS_DECLARED)
    assert findings == []


OPS_REFUSE = """\
unsupported:
  - id: ops-refuse-moe-on-gb10
    when: {gpu.sm: sm121, quant.moe_scheme: nvfp4}
    paths: [moe]
    refuse: true
    because: our GB10 image cannot load NVFP4 experts
"""


def test_an_unsupported_entry_that_refuses_decides_and_the_check_accepts_it(tmp_path: Path) -> None:
    """No rule denies a backend here: the entry alone takes them out, in those cells only."""
    import kernelpolicy as kp
    from kernelpolicy.dsl.loader import SourceFile, load_files

    _, findings = _ops_check(tmp_path, OPS_REFUSE)
    assert findings == []  # not `no-backend` (declared), not `unsupported-unused` (it decides)
    ops = tmp_path / "ops.yaml"
    policy = load_files([SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")])
    for scheme, none in (("nvfp4", True), ("fp8_block", False)):
        facts = kp.facts_for(gpu="sm121", facts={"model.is_moe": True, "quant.moe_scheme": scheme}, policy=policy)
        moe = kp.resolve(facts, policy).paths["moe"]
        assert (moe.backend is None) is none and (moe.rule == "ops-refuse-moe-on-gb10") is none
    ops.write_text(OPS_REFUSE.replace("    refuse: true\n", ""))  # declared only: the rules give a backend
    assert [f.code for f in _ops_check(tmp_path, ops.read_text())[1]] == ["unsupported-unused"]


@pytest.mark.last
def test_the_example_fleet_policy_passes_its_own_check(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exhaustive proof CI runs: every cell of the shipped tables with the example operator
    policy on top, warnings about the shipped rules included (``--all-findings``). The command is
    the one scripts/test.sh starts in the background before the engine venvs build (same files,
    same names), and it is still walking while the rest of the suite runs: this test runs last
    and waits for it (the certificate's lock), then reads its certificate back; with no such walk
    under way and no certificate, it walks every cell itself."""
    monkeypatch.chdir(Path(__file__).parent.parent)
    rc = main(["check", "--strict", "--all-findings", "policy/examples/fleet.yaml"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.splitlines()[-1].endswith(" 0 errors, 0 warnings") or ": 0 errors, 0 warnings in" in out
    assert "verified " in out and " domain cells over " in out


CONFLICT_A = """\
implies:
  - id: ops-a-gb10-has-sf
    when: {gpu.sm: sm121}
    set: {deep_gemm.has_sm120_sf_layout: true}
"""
CONFLICT_B = """\
implies:
  - id: ops-b-gb10-lacks-sf
    when: {gpu.sm: sm121}
    set: {deep_gemm.has_sm120_sf_layout: false}
"""


def test_file_order_never_decides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(CONFLICT_A)
    b.write_text(CONFLICT_B)
    model = ["--gpu", "sm121", "--model", "RedHatAI/gemma-4-31B-it-FP8-block", "--no-env"]
    for first, second in ((a, b), (b, a)):
        rc = main(["explain", *model, "--policy", str(first), "--policy", str(second)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        assert "ops-a-gb10-has-sf" in err[0] and "ops-b-gb10-lacks-sf" in err[0]
    rc, out = run_json(capsys, "--bare", "--no-coverage", str(BASE), str(a), str(b))
    assert rc == 1 and [f["code"] for f in out["findings"]] == ["implies-conflict"]


OPS_TWO_REASONS = """\
rules:
  - id: ops-no-triton-on-llama4
    when: {model.type: llama4}
    deny: triton
    paths: [moe]
    severity: accuracy
    because: not validated for Llama 4
  - id: ops-no-triton-on-deepseek
    when: {model.type: deepseek_v3}
    deny: triton
    paths: [moe]
    severity: perf
    because: slower than Marlin on DeepSeek-V3
  - id: ops-no-marlin-before-0.30
    when: {vllm.version: "<0.30"}
    deny: marlin
    paths: [moe]
    severity: accuracy
    because: a Marlin MoE fix lands in 0.30
"""


def test_a_backend_rejected_for_different_reasons_is_walked_past_once(tmp_path: Path) -> None:
    """Triton is out for Llama 4 (one rule) and for DeepSeek-V3 (another): the walk settles
    Triton's verdict, not each rule, so Marlin's own split (by vLLM release) happens once for
    both model types, and every cell still decides as its group (brute force)."""
    import itertools

    import kernelpolicy as kp
    from kernelpolicy.analysis.coverage import verify
    from kernelpolicy.dsl.loader import SourceFile, load_files
    from kernelpolicy.facts import Facts

    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_TWO_REASONS)
    policy = load_files([SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")])
    cov = verify(policy, jobs=1)
    moe = [pg for pg in cov.results if pg.path == "moe"]
    gpus = {pg.group.fixed["gpu.sm"].label for pg in moe}  # the walk's tasks: one per GPU class
    marlin = [pg for pg in moe if pg.backend == "marlin"]
    assert len(marlin) == len(gpus)  # not once per model type Triton is rejected for
    assert {pg.group.fixed["model.type"].label for pg in marlin} == {"deepseek_v3|llama4"}
    holes = [pg for pg in moe if pg.backend is None]
    assert len(holes) == len(gpus) and all({v.code for v in pg.violations} == {"no-backend"} for pg in holes)
    # brute force over the classes of the domain: each cell lies in one group and decides as it
    dims = [d for d in cov.domain.dims if d.name != "model.is_moe"]
    for combo in itertools.product(*(d.values for d in dims)):
        raw: dict[str, Any] = {"model.is_moe": True}
        for v in combo:
            raw.update(v.facts)
        facts = Facts.from_values({k: v for k, v in raw.items() if v is not None}, source="user")
        mine = [
            pg
            for pg in moe
            if all(
                pg.group.fixed[d.name].covers(v) for d, v in zip(dims, combo, strict=True) if d.name in pg.group.fixed
            )
        ]
        assert len(mine) == 1 and mine[0].backend == kp.resolve(facts, policy).paths["moe"].backend, raw


OPS_DEEPER = """\
  - id: ops-no-triton-with-big-ep
    when: {deploy.ep: ">= 8", triton.version: "<3.4"}
    deny: triton
    paths: [moe]
    severity: perf
    because: a test rule over an integer and a version
  - id: ops-no-marlin-with-lora
    when: {deploy.lora: true, quant.moe_scheme: fp8_block}
    deny: marlin
    paths: [moe]
    severity: support
    because: a test rule over a flag and a scheme
"""


def test_a_walk_over_several_workers_gives_the_groups_of_one_walk_in_its_order(tmp_path: Path) -> None:
    """With workers, each task is cut into the parts its first splits make and the parts are
    walked apart (one task holds most of the groups): the groups, their outcomes and their
    order are those of the walk on one process."""
    from kernelpolicy.analysis.coverage import PLAN_DEPTH, _Part, _Walker, verify
    from kernelpolicy.dsl.loader import SourceFile, load_files

    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_TWO_REASONS + OPS_DEEPER)
    policy = load_files([SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")])
    one, two = verify(policy, jobs=1), verify(policy, jobs=2)

    def shown(cov: Any) -> list[Any]:
        return [
            (pg.path, pg.group.label(), pg.group.weight, pg.backend, pg.candidates, pg.violations, pg.fires)
            for pg in cov.results
        ]

    assert shown(one) == shown(two) and one.groups == two.groups and one.skipped == two.skipped
    walker = _Walker(policy, one.domain)
    parts = [x for t in walker.tasks() for x in walker.plan(t, PLAN_DEPTH) if isinstance(x, _Part)]
    assert any(len(x.route) == PLAN_DEPTH for x in parts)  # some task was cut that deep


def _bare_files() -> list[Any]:
    from kernelpolicy.dsl.loader import SourceFile

    return [
        SourceFile(BASE, "rules/catalog.yaml", "shipped"),
        SourceFile(HERE / "stale-until.yaml", "rules/stale-until.yaml", "shipped"),
    ]


def test_the_proof_is_kept_once_per_content_and_a_tampered_one_is_recomputed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelpolicy.analysis import certificate
    from kernelpolicy.analysis.checking import check

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    first = check(_bare_files(), jobs=1)
    assert not first.reused and first.summary is not None and [f.code for f in first.findings] == ["stale-rule"]
    (entry,) = (tmp_path / "check").glob("certificate-*.json")
    head, body = entry.read_bytes().split(b"\n", 1)
    key = entry.name[len("certificate-") : -len(".json")]
    (packed,) = (tmp_path / "check").glob("certificate-*.groups.json.gz")
    groups = json.loads(gzip.decompress(packed.read_bytes()))  # plain data: groups, outcomes, rules
    assert b"pickle" not in body and groups["groups"] and groups["names"]
    assert json.loads(body)["groups_sha256"] == hashlib.sha256(packed.read_bytes()).hexdigest()
    whole = certificate.read_groups(key, tmp_path / "check")
    assert whole is not None and whole.groups == groups["groups"] and sum(g[2] for g in whole.groups) > 0
    again = check(_bare_files(), jobs=1)
    assert again.reused and again.findings == first.findings and again.summary == first.summary
    # groups changed behind kernelpolicy's back are not the entry's: never read back
    packed.write_bytes(gzip.compress(json.dumps({"groups": [], "names": []}).encode()))
    assert certificate.read_groups(key, tmp_path / "check") is None
    # an entry changed behind kernelpolicy's back (no finding any more) is not trusted
    data = json.loads(body)
    data["findings"] = []
    entry.write_bytes(head + b"\n" + json.dumps(data).encode())
    third = check(_bare_files(), jobs=1)
    assert not third.reused and [f.code for f in third.findings] == ["stale-rule"]
    assert certificate.read(entry.name[len("certificate-") : -len(".json")], tmp_path / "check") is not None


def test_a_second_check_of_the_same_files_waits_for_the_first_and_reads_its_proof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one check computes a proof (it holds the key's lock), another check of the same
    files waits, then reads the certificate the first wrote instead of walking again."""
    import threading

    from kernelpolicy.analysis import certificate
    from kernelpolicy.analysis import checking as checking_mod

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    key = certificate.certificate_key(_bare_files(), explicit=False, subject=None)
    assert key is not None
    walks: list[int] = []
    real = checking_mod.verify
    monkeypatch.setattr(checking_mod, "verify", lambda *a, **k: walks.append(1) or real(*a, **k))
    second: list[checking_mod.CheckReport] = []
    waiter = threading.Thread(target=lambda: second.append(checking_mod.check(_bare_files(), jobs=1)))
    with certificate.computing(key):  # the first check, walking
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not second  # waiting on the lock, not walking
        first = checking_mod.check(_bare_files(), jobs=1, cache=False)  # the walk the holder makes...
        assert first.summary is not None
        certificate.write(
            certificate.Certificate(key, first.findings, first.summary, *checking_mod._outcomes(first.coverage))
        )  # ...and the certificate it leaves
    waiter.join(60)
    assert not waiter.is_alive() and second[0].reused and second[0].findings == first.findings
    assert len(walks) == 1  # only the holder walked
    assert not list((tmp_path / "check").glob(".lock-*"))  # no lock is left behind


def test_a_certificate_others_may_write_is_never_believed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate planted in a folder others may write (with a matching checksum: it is its
    own) would hide findings: it is recomputed, and nothing is written there."""
    from kernelpolicy.analysis.checking import check

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    first = check(_bare_files(), jobs=1)
    (entry,) = (tmp_path / "check").glob("certificate-*.json")
    data = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    data["findings"] = []  # the planted proof: no finding
    body = json.dumps(data, separators=(",", ":")).encode()
    head = json.loads(entry.read_bytes().split(b"\n", 1)[0])
    head["sha256"] = hashlib.sha256(body).hexdigest()
    entry.write_bytes(json.dumps(head).encode() + b"\n" + body)
    (tmp_path / "check").chmod(0o777)
    planted = check(_bare_files(), jobs=1)
    assert not planted.reused and [f.code for f in planted.findings] == [f.code for f in first.findings]
    (tmp_path / "check").chmod(0o700)
    assert check(_bare_files(), jobs=1).reused  # this user's folder alone again: its entries are believed


def test_an_operator_file_is_walked_only_where_it_can_change_a_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ground's proof comes from its certificate; the operator's hole is found in the cells
    its rules reach, with the same findings as a walk of every cell."""
    from kernelpolicy.analysis.checking import check
    from kernelpolicy.dsl.loader import SourceFile

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_HOLE)
    files = [SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")]
    composed = check(files, subject=[str(ops)], jobs=1)
    whole = check(files, subject=[str(ops)], jobs=1, compose=False)
    assert composed.summary is not None and whole.summary is not None
    assert composed.summary["certificate"] and composed.summary["skipped"] > 0
    assert sum(composed.summary["groups"].values()) < sum(whole.summary["groups"].values())
    assert [(f.code, f.file, f.cells) for f in composed.findings] == [(f.code, f.file, f.cells) for f in whole.findings]
    assert [f.code for f in composed.findings] == ["no-backend"]


def test_one_run_writes_annotations_and_sarif(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sarif = tmp_path / "out.sarif"
    rc = main(
        [
            "check",
            "--format",
            "github",
            "--sarif-file",
            str(sarif),
            "--bare",
            str(BASE),
            str(HERE / "shadowed-rule.yaml"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "::warning " in out
    (res,) = json.loads(sarif.read_text())["runs"][0]["results"]
    assert res["ruleId"] == "shadowed"


def test_progress_shows_a_fraction_and_an_estimate() -> None:
    import io

    from kernelpolicy.progress import Progress

    p = Progress("checking", io.StringIO(), force=True)
    assert "parts" not in p.line(0)
    p._start -= 10.0
    p.fraction(5, 20)
    line = p.line(0)
    assert "5/20 parts" in line and "s left" in line, line


def test_every_class_of_the_shipped_domain_holds_values_its_facts_take() -> None:
    """The walk resolves a representative of each class: each must be a value the fact takes
    (a `quant.block` of `[0]` stood for "any other block" and made every walk fail once the
    fact was held to two positive sizes)."""
    import kernelpolicy as kernel_policy
    from kernelpolicy.analysis.domain import build_domain
    from kernelpolicy.facts.record import normalise_value

    domain = build_domain(kernel_policy.load_policy(environ=False))
    bad = []
    for dim in domain.dims:
        for cls in dim.values:
            for key, value in cls.facts.items():
                try:
                    normalise_value(key, value)
                except kernel_policy.KernelPolicyError as exc:
                    bad.append(f"{dim.name}={cls.label}: {exc}")
    assert bad == []


def test_a_group_s_values_are_narrowed_from_its_parent_s_as_computed_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child of a split reads the values its keys can take from its parent's, with the split
    dimension's replaced: at every split of a walk, the same as computed from the child's
    classes alone."""
    from kernelpolicy.analysis import coverage
    from kernelpolicy.dsl.loader import SourceFile, load_files

    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_TWO_REASONS + OPS_DEEPER)
    policy = load_files([SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")])
    narrowed = coverage._Walker.narrowed
    seen: list[str] = []

    def checked(self: Any, possible: Any, fixed: Any, name: str, moe: bool) -> dict[str, Any]:
        out = narrowed(self, possible, fixed, name, moe)
        assert out == self.possible(fixed, moe), name
        seen.append(name)
        return out

    monkeypatch.setattr(coverage._Walker, "narrowed", checked)
    coverage.verify(policy, jobs=1)
    assert len(seen) > 100 and len(set(seen)) > 5  # many splits, over many dimensions


def test_a_part_s_groups_go_back_to_the_parent_with_each_candidate_list_once(tmp_path: Path) -> None:
    """The groups a worker hands back hold each distinct candidate list as one object (pickle
    then writes it once): equal to the groups as walked, and fewer bytes to pickle."""
    import pickle

    from kernelpolicy.analysis.coverage import _shared, _Walker
    from kernelpolicy.analysis.domain import build_domain
    from kernelpolicy.dsl.loader import SourceFile, load_files

    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_TWO_REASONS + OPS_DEEPER)
    policy = load_files([SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")])
    walker = _Walker(policy, build_domain(policy))
    groups = [pg for t in walker.tasks() if t[0] == "moe" for pg in walker.walk_task(t)]
    shared = _shared(groups)
    assert shared == groups
    lists = {pg.candidates for pg in groups}
    assert len({id(pg.candidates) for pg in shared}) == len(lists) < len(groups) // 2
    assert len({id(c) for pg in shared for c in pg.candidates}) == len({c for cs in lists for c in cs})
    assert len(pickle.dumps(shared)) < len(pickle.dumps(groups))


def test_a_walk_leaves_no_reference_cycles_behind(tmp_path: Path) -> None:
    """The walk runs with Python's cycle collector paused
    (:func:`kernelpolicy._collector.collector_paused`), which is sound only while every object it
    drops is freed by its reference count: walked with the collector keeping whatever it would
    have freed, nothing is left (reasons worded, explicit picks that contradict each other,
    several layers)."""
    import gc

    from kernelpolicy.analysis.coverage import verify
    from kernelpolicy.dsl.loader import SourceFile, load_files

    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_TWO_REASONS + OPS_DEEPER)
    files = [SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")]
    clash = HERE / "contradiction-use.yaml"
    files.append(SourceFile(clash, str(clash), "policy"))
    policy = load_files(files)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        cov = verify(policy, jobs=1)
        for pg in cov.results:  # the reasons, worded as `check` words them
            _ = [c.reason for c in pg.candidates]
        gc.collect()
        left = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert any(v.code == "contradiction" for v in cov.violations)
    assert left == []


def test_an_operator_file_without_implications_is_not_searched_for_their_conflicts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search for implications that contradict each other runs over the whole domain (11 s
    for the shipped tables). Composed on a clean ground, FILES that add no implication hold the
    ground's, which its proof cleared: the search is not made again. FILES that add one are
    searched, and a conflict with the ground's implication is found."""
    from kernelpolicy.analysis import checking
    from kernelpolicy.dsl.loader import SourceFile

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    shipped, theirs = tmp_path / "implies.yaml", tmp_path / "theirs.yaml"
    pair = (HERE / "implies-conflict.yaml").read_text().split("  - id: family120")
    shipped.write_text(pair[0])
    theirs.write_text("implies:\n  - id: family120" + pair[1])
    rules = tmp_path / "rules.yaml"
    rules.write_text(OPS_HOLE)
    ground = [SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(shipped, "rules/implies.yaml", "shipped")]
    searched: list[int] = []
    search = checking.implication_conflicts

    def counted(*args: Any) -> Any:
        searched.append(1)
        return search(*args)

    monkeypatch.setattr(checking, "implication_conflicts", counted)
    assert checking.check(ground, jobs=1).findings == []  # the ground's own proof: searched once
    assert searched == [1]
    mine = checking.check([*ground, SourceFile(rules, str(rules), "policy")], subject=[str(rules)], jobs=1)
    assert mine.summary is not None and mine.summary["certificate"]  # composed on the ground
    assert [f.code for f in mine.findings] == ["no-backend"] and searched == [1]
    whole = checking.check(
        [*ground, SourceFile(rules, str(rules), "policy")], subject=[str(rules)], jobs=1, compose=False
    )
    assert [(f.code, f.cells) for f in whole.findings] == [(f.code, f.cells) for f in mine.findings]
    assert searched == [1, 1]
    clash = checking.check([*ground, SourceFile(theirs, str(theirs), "policy")], subject=[str(theirs)], jobs=1)
    assert [f.code for f in clash.findings] == ["implies-conflict"] and searched == [1, 1, 1]
