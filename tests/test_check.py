"""``kernelpolicy check``: one deliberately broken file per kind of finding (tests/check/).

Each file loads on top of a tiny catalog (tests/check/base/catalog.yaml) with ``--bare``, so
each run is fast and the finding it must produce is the only one.
"""

from __future__ import annotations

import hashlib
import itertools
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
    assert re.search(r"^verified every one of 180 cells over 4 dimensions \(.*diagram nodes.*\)", text, re.M), text
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
    return str(ops), check(files, subject=[str(ops)]).findings


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


def test_an_unsupported_entry_that_holds_only_for_dense_models_covers_no_moe_hole(tmp_path: Path) -> None:
    """The MoE path is decided for MoE models only: an entry whose `when` holds on dense models
    alone covers none of its holes (the hole stays an error, the entry is unused), however the
    diagram marks the dense model's cells of the path."""
    dense_only = OPS_HOLE + (
        "unsupported:\n  - id: ops-dense-only\n    when: {gpu.sm: sm121, model.is_moe: false}\n"
        "    paths: [moe]\n    because: a dense model has no MoE layers\n"
    )
    _, findings = _ops_check(tmp_path, dense_only)
    assert sorted(f.code for f in findings) == ["no-backend", "unsupported-unused"]
    _, findings = _ops_check(tmp_path, OPS_DECLARED)
    assert findings == []  # the same hole, covered for MoE models


def test_the_example_fleet_policy_passes_its_own_check(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exhaustive proof CI runs: every cell of the shipped tables with the example operator
    policy on top, warnings about the shipped rules included (``--all-findings``), computed
    afresh (no certificate)."""
    monkeypatch.setenv("KERNELPOLICY_NO_CACHE", "1")
    monkeypatch.chdir(Path(__file__).parent.parent)
    rc = main(["check", "--strict", "--all-findings", "policy/examples/fleet.yaml"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.splitlines()[-1].endswith(" 0 errors, 0 warnings") or ": 0 errors, 0 warnings in" in out
    assert re.search(r"verified every one of about \d(\.\d)? x 10\^\d+ cells over ", out), out


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
    from kernelpolicy.analysis.mdd import Manager

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    first = check(_bare_files())
    assert not first.reused and first.summary is not None and [f.code for f in first.findings] == ["stale-rule"]
    (entry,) = (tmp_path / "check").glob("certificate-*.json")
    head, body = entry.read_bytes().split(b"\n", 1)
    key = entry.name[len("certificate-") : -len(".json")]
    kept = certificate.read(key, tmp_path / "check")
    assert kept is not None and b"pickle" not in body
    # the diagrams, as plain data: each path's root, and the outcome of a cell read back from them
    assert (
        set(kept.diagrams["roots"]) == {"dense", "moe", "router", "attention"}
        and kept.diagrams["levels"][0] == "gpu.sm"
    )
    roots = Manager(kept.diagrams["sizes"]).load(kept.diagrams, certificate.outcome)
    assert set(roots) == {"dense", "moe", "router", "attention"}
    again = check(_bare_files())
    assert again.reused and again.findings == first.findings and again.summary == first.summary
    # an entry whose diagram names a child after its parent is not a diagram: never believed,
    # even with its checksum made to match
    data = json.loads(body)
    inner = next(i for i, n in enumerate(data["diagrams"]["nodes"]) if n[0] != "t")
    data["diagrams"]["nodes"][inner][1][0] = len(data["diagrams"]["nodes"])
    forged = json.dumps(data, separators=(",", ":")).encode()
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(forged).hexdigest()
    entry.write_bytes(json.dumps(header).encode() + b"\n" + forged)
    assert certificate.read(key, tmp_path / "check") is None
    # an entry changed behind kernelpolicy's back (no finding any more) is not trusted
    data = json.loads(body)
    data["findings"] = []
    entry.write_bytes(head + b"\n" + json.dumps(data).encode())
    third = check(_bare_files())
    assert not third.reused and [f.code for f in third.findings] == ["stale-rule"]
    assert certificate.read(key, tmp_path / "check") is not None


def test_the_ground_of_a_layer_is_kept_as_its_proof_only_and_its_own_check_adds_the_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A layer's check with no proof of the files below it at hand proves them without their
    findings (not the layer's to see) and keeps that proof for the next layer; a check of those
    files themselves never takes it for theirs: it finds their warning and keeps the whole."""
    from kernelpolicy.analysis import certificate, layered
    from kernelpolicy.analysis.certificate import certificate_key
    from kernelpolicy.analysis.checking import check
    from kernelpolicy.dsl.loader import SourceFile

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_DECLARED)
    mine = SourceFile(ops, "ops.yaml", "policy")
    monkeypatch.setattr(layered, "_KEPT", {})  # no proof kept by this process
    first = check([*_bare_files(), mine], subject=["ops.yaml"])
    assert first.findings == [] and first.summary is not None  # the ground's stale rule is not the layer's
    key = certificate_key(_bare_files(), explicit=False, subject=None)
    assert key is not None
    ground = certificate.read(key, tmp_path / "cache" / "check")
    assert ground is not None and ground.findings is None and set(ground.diagrams["roots"]) >= {"dense", "moe"}
    # the next layer stands on the kept ground: it is not proven again
    monkeypatch.setattr(layered, "_KEPT", {})
    proven: list[Any] = []
    from kernelpolicy.analysis import checking as checking_mod

    real_verify = checking_mod.verify
    monkeypatch.setattr(checking_mod, "verify", lambda p, **kw: proven.append(kw) or real_verify(p, **kw))
    ops.write_text(OPS_DECLARED + "\n# edited\n")
    second = check([*_bare_files(), SourceFile(ops, "ops.yaml", "policy")], subject=["ops.yaml"])
    assert second.findings == [] and [kw.get("base") is not None for kw in proven] == [True]
    whole = check(_bare_files())
    assert not whole.reused and [f.code for f in whole.findings] == ["stale-rule"]
    kept = certificate.read(key, tmp_path / "cache" / "check")
    assert kept is not None and kept.findings is not None and [f.code for f in kept.findings] == ["stale-rule"]


def test_a_proof_kept_without_findings_and_without_diagrams_is_not_believed(tmp_path: Path) -> None:
    from kernelpolicy.analysis import certificate

    summary = {"cells": 1, "resolves": 0, "pruned": 0, "seconds": 0.0, "nodes": {}, "outcomes": {}, "dimensions": []}
    certificate.write(certificate.Certificate("k" * 64, None, summary, {}), tmp_path)
    assert certificate.read("k" * 64, tmp_path) is None


def test_a_file_saved_while_it_is_checked_never_gets_the_old_content_s_proof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certificate's key and the proof come from one read of each file: a rule file saved
    between the two (the race hostile round four found) keeps the proof of what was proven, under
    that content's key, and the new content is proven afresh."""
    from kernelpolicy.analysis import checking as checking_mod
    from kernelpolicy.dsl.loader import SourceFile

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_DECLARED)  # clean
    files = [SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")]
    from kernelpolicy.dsl import loader

    original = loader.load_files

    def saved_meanwhile(sources: Any) -> Any:
        ops.write_text(OPS_HOLE)  # the operator saves a hole while the check runs
        return original(sources)

    monkeypatch.setattr(loader, "load_files", saved_meanwhile)
    during = checking_mod.check(files)
    monkeypatch.setattr(loader, "load_files", original)
    assert during.findings == []  # the proof of what was read: clean
    after = checking_mod.check(files)  # the hole, under its own key: never the clean proof
    assert not after.reused and [f.code for f in after.findings] == ["no-backend"]


def test_an_operator_rule_s_exact_usage_and_every_cell_as_the_resolver_decides_it(tmp_path: Path) -> None:
    """Triton is out for Llama 4 (one rule) and for DeepSeek-V3 (another); Marlin before vLLM 0.30.
    Each rule is the sole and gravest reason somewhere (none is dead or shadowed), and the MoE
    decision of every cell of the domain, read off the diagram, is the resolver's."""
    import kernelpolicy as kp
    from kernelpolicy.analysis.coverage import verify
    from kernelpolicy.dsl.loader import SourceFile, load_files
    from kernelpolicy.facts import Facts

    ops = tmp_path / "ops.yaml"
    ops.write_text(OPS_TWO_REASONS)
    policy = load_files([SourceFile(BASE, "rules/catalog.yaml", "shipped"), SourceFile(ops, str(ops), "policy")])
    cov = verify(policy)
    for rid in ("ops-no-triton-on-llama4", "ops-no-triton-on-deepseek", "ops-no-marlin-before-0.30"):
        u = cov.usage[rid]
        assert (u.fires, u.sole, u.first) == (True, True, True), (rid, u)
    c = cov.compiled
    assert c is not None
    moe = c.outcome("moe")
    cells = 0
    for cell in itertools.product(*(range(n) for n in c.m.sizes)):
        at = dict(enumerate(cell))
        if at[c.moe_level] != c.moe_index:
            continue
        raw, _ = c.facts(at)
        decided = kp.resolve(Facts.from_values(raw), policy).paths["moe"].backend
        assert c.m.evaluate(moe, at).backend == decided, raw
        cells += 1
    assert cells == 18  # every MoE cell of this small domain


def test_a_certificate_others_may_write_is_never_believed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate planted in a folder others may write (with a matching checksum: it is its
    own) would hide findings: it is recomputed, and nothing is written there."""
    from kernelpolicy.analysis.checking import check

    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    first = check(_bare_files())
    (entry,) = (tmp_path / "check").glob("certificate-*.json")
    data = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    data["findings"] = []  # the planted proof: no finding
    body = json.dumps(data, separators=(",", ":")).encode()
    head = json.loads(entry.read_bytes().split(b"\n", 1)[0])
    head["sha256"] = hashlib.sha256(body).hexdigest()
    entry.write_bytes(json.dumps(head).encode() + b"\n" + body)
    (tmp_path / "check").chmod(0o777)
    planted = check(_bare_files())
    assert not planted.reused and [f.code for f in planted.findings] == [f.code for f in first.findings]
    (tmp_path / "check").chmod(0o700)
    assert check(_bare_files()).reused  # this user's folder alone again: its entries are believed


def test_a_certificates_folder_others_may_write_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """R16 of hostile round four: certificates in a folder that is not this user's alone were
    dropped without a word. It is one warning on stderr (stdout stays the format's), the proof
    is computed afresh, and nothing is written there."""
    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KERNELPOLICY_NO_CACHE", raising=False)
    (tmp_path / "check").mkdir(mode=0o700)
    (tmp_path / "check").chmod(0o777)
    argv = ["check", "--format", "json", "--bare", str(BASE), str(HERE / "shadowed-rule.yaml")]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["certificate"] == "computed"
    (line,) = err.splitlines()
    assert line.startswith("kernelpolicy: warning: certificates in `") and f"{tmp_path / 'check'}`" in line
    assert "neither read nor kept" in line and "not this user's alone" in line
    assert list((tmp_path / "check").iterdir()) == []
    (tmp_path / "check").chmod(0o700)  # this user's alone: used, and nothing said
    assert main(argv) == 0
    assert capsys.readouterr().err == "" and list((tmp_path / "check").glob("certificate-*.json"))


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


def test_every_class_of_the_shipped_domain_holds_values_its_facts_take() -> None:
    """The proof resolves a witness of each outcome: each class must be a value the fact takes
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


def _stale_ids(tmp_path: Path, pins: dict[str, str]) -> list[str]:
    from kernelpolicy.analysis.static import stale
    from kernelpolicy.dsl.loader import load_policy

    implies = "".join(
        f'  - id: vllm-{v}-pins-triton\n    when: {{vllm.version: ">={v},<{v[:-1]}{int(v[-1]) + 1}"}}\n'
        f'    set: {{triton.version: "{t}"}}\n    refs: [test#1]\n'
        for v, t in pins.items()
    )
    body = (HERE / "stale-until.yaml").read_text(encoding="utf-8").split("rules:", 1)[1]
    f = tmp_path / "rules.yaml"
    f.write_text(f"implies:\n{implies}\nrules:{body}", encoding="utf-8")
    catalog = HERE / "base" / "catalog.yaml"
    policy = load_policy([catalog, f], shipped=False, default_policy=False, environ=False)
    return [finding.rule for finding in stale(policy)]


def test_a_fix_within_the_modelled_releases_is_not_stale(tmp_path: Path) -> None:
    """Found as: SGLang's pins, once implied, made every SGLang rule whose fix shipped in 0.5.15
    or 0.5.17 "stale" (the newest release has the fix), though 0.5.12-0.5.16 still need them."""
    assert _stale_ids(tmp_path, {"0.30": "3.6.0", "0.31": "3.7.1"}) == []
    assert _stale_ids(tmp_path, {"0.30": "3.7.0", "0.31": "3.7.1"}) == ["triton-crashes-before-3.7"]
