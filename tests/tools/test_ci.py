"""CI and review: `check --format github` annotations, SARIF 2.1.0 against the OASIS schema,
the pre-commit hook and the GitHub Action."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelpolicy.analysis.findings import CODES, Finding
from kernelpolicy.analysis.sarif import DESCRIPTIONS, to_sarif
from kernelpolicy.cli import main

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "check"
# The SARIF 2.1.0 schema of the OASIS standard (sarif-2.1/schema/sarif-schema-2.1.0.json of
# oasis-tcs/sarif-spec), kept as test data: the test needs no network.
SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["check", "--jobs", "1", *argv])
    return code, capsys.readouterr().out


def _sarif_errors(doc: Any) -> list[str]:
    v = jsonschema.Draft4Validator(SARIF_SCHEMA, format_checker=jsonschema.FormatChecker())
    return [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(doc)]


CASES = [
    "dead-rule.yaml",
    "schema-error.yaml",
    "unknown-backend.yaml",
    "coverage-hole.yaml",
    "contradiction-prefer.yaml",
]


@pytest.mark.parametrize("name", CASES)
def test_sarif_passes_the_schema_and_locates_every_finding(capsys: pytest.CaptureFixture[str], name: str) -> None:
    files = [str(DATA / name)] if name == "coverage-hole.yaml" else [str(DATA / "base"), str(DATA / name)]
    _, out = _check(capsys, "--bare", "--format", "sarif", *files)
    doc = json.loads(out)
    assert _sarif_errors(doc) == []
    run = doc["runs"][0]
    assert run["results"], "each case has at least one finding"
    rules = run["tool"]["driver"]["rules"]
    for res in run["results"]:
        (loc,) = res["locations"]
        art = loc["physicalLocation"]["artifactLocation"]
        assert art["uriBaseId"] == "%SRCROOT%" and not art["uri"].startswith("/")
        assert (ROOT / art["uri"]).is_file() or (Path.cwd() / art["uri"]).is_file()
        assert loc["physicalLocation"]["region"]["startLine"] >= 1
        assert re.fullmatch(r"[0-9a-f]{32}", res["partialFingerprints"]["kernelpolicyFinding/v1"])
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert rules[res["ruleIndex"]]["shortDescription"]["text"]


def test_every_finding_code_has_a_description() -> None:
    assert set(DESCRIPTIONS) == set(CODES)


def test_sarif_location_for_a_finding_without_a_file_and_stable_fingerprints(tmp_path: Path) -> None:
    domain = Finding("no-backend", "path `moe` has no valid backend in 16 cells", "error", cell="sm90", cells=16)
    moved = Finding("dead", "rule `x` never acts", "warning", file="rules/a.yaml", line=3, column=5, rule="x")
    doc = to_sarif(
        [
            domain,
            moved,
            Finding("dead", "rule `x` never acts", "warning", file="rules/a.yaml", line=40, column=5, rule="x"),
        ],
        files=["rules/a.yaml"],
        root=tmp_path,
    )
    assert _sarif_errors(doc) == []
    r0, r1, r2 = doc["runs"][0]["results"]
    assert r0["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "rules/a.yaml"
    assert r1["partialFingerprints"] == r2["partialFingerprints"] != r0["partialFingerprints"]
    outside = to_sarif([Finding("dead", "m", file="/elsewhere/p.yaml", line=1)], root=tmp_path)
    assert outside["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "file:///elsewhere/p.yaml"
    )


def test_github_annotations(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check(capsys, "--bare", "--format", "github", str(DATA / "base"), str(DATA / "unknown-backend.yaml"))
    assert code == 1
    lines = out.splitlines()
    errors = [ln for ln in lines if ln.startswith("::error ")]
    assert len(errors) == 1
    m = re.fullmatch(r"::error file=([^,]+),line=(\d+),col=(\d+),endColumn=(\d+),title=([^:]+)::(.*)", errors[0])
    assert m, errors[0]
    file, line = m.group(1), int(m.group(2))
    assert file.endswith("tests/check/unknown-backend.yaml")
    assert "tritn" in Path(file).read_text(encoding="utf-8").splitlines()[line - 1]
    assert m.group(5).startswith("kernelpolicy schema")
    assert "`tritn`" in m.group(6)
    assert lines[-1].startswith("2 files: 1 errors")


def test_github_annotation_escapes_newlines_and_separators() -> None:
    from kernelpolicy._github import annotation

    f = Finding("dead", "100% dead\nreally", "warning", file="a,b:c.yaml", line=2, rule="r:1", help="x")
    text = annotation(f)
    assert "\n" not in text
    assert text.startswith("::warning file=a%2Cb%3Ac.yaml,line=2,title=kernelpolicy dead (r%3A1)::100%25 dead%0Areally")


def test_json_and_sarif_flags_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(DATA / "base"), str(DATA / "dead-rule.yaml")]
    _, out = _check(capsys, "--bare", "--json", *files)
    assert json.loads(out)["schema"] == "kernelpolicy.check/1"
    _, out = _check(capsys, "--bare", "--sarif", *files)
    assert json.loads(out)["version"] == "2.1.0"
    assert main(["check", "--json", "--format", "github"]) == 2


# --------------------------------------------------------------------------- pre-commit, Action


def test_pre_commit_hooks_run(tmp_path: Path) -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    assert {"kernelpolicy-check", "kernelpolicy-fmt"} <= set(hooks)
    bad = tmp_path / "policy.yaml"
    bad.write_text("rules:\n  - id: x\n    deny: tritn\n    because: typo\n", encoding="utf-8")
    good = tmp_path / "ok.yaml"
    good.write_text("rules: []\n", encoding="utf-8")
    for hook in hooks.values():
        assert hook["language"] == "python" and re.search(hook["files"], "policy/prod.yaml")
        argv = [*shlex.split(hook["entry"]), *hook.get("args", [])]
        assert argv[0] == "kernelpolicy"
        # --no-coverage keeps the test fast; the hook itself runs the exhaustive check
        cmd = [sys.executable, "-m", "kernelpolicy", *argv[1:], *(["--no-coverage"] if "check" in argv else [])]
        ok = subprocess.run([*cmd, str(good)], capture_output=True, text=True, check=False, cwd=tmp_path)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        if hook["id"] == "kernelpolicy-check":
            res = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, check=False, cwd=tmp_path)
            assert res.returncode == 1 and "tritn" in res.stdout


def test_action_runs_check_with_annotations_and_sarif() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    script = "\n".join(s.get("run", "") for s in action["runs"]["steps"])
    # one run: annotations on stdout, SARIF written from the same findings (--sarif-file)
    assert "kernelpolicy check" in script and "--format github" in script and "--sarif-file" in script
    assert script.count("kernelpolicy check") == 1
    uploads = [s for s in action["runs"]["steps"] if "upload-sarif" in s.get("uses", "")]
    assert uploads and set(action["inputs"]) >= {"files", "strict", "sarif-file"}
    # the proof takes seconds: no certificate cache, whose key (hashFiles of the action's own
    # folder, outside the workspace) was a constant
    cached = [s["with"]["path"] for s in action["runs"]["steps"] if s.get("uses", "").startswith("actions/cache@")]
    assert cached == ["~/.cache/pip"]


def test_a_shipped_file_named_again_is_checked_once(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = ROOT / "rules" / "backends" / "moe.yaml"
    _, out = _check(capsys, "--no-coverage", "--format", "json", str(shipped))
    doc = json.loads(out)
    assert [f for f in doc["findings"] if f["code"] == "duplicate"] == []
    assert sum(1 for f in doc["files"] if f.endswith("backends/moe.yaml")) == 1


def test_the_action_check_step_runs(tmp_path: Path) -> None:
    if not (Path(sys.executable).parent / "kernelpolicy").exists():
        pytest.skip("no kernelpolicy script beside python")
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    step = next(s for s in action["runs"]["steps"] if s.get("name") == "kernelpolicy check (annotations)")
    bad = tmp_path / "policy"
    bad.mkdir()
    (bad / "p.yaml").write_text("rules:\n  - id: x\n    deny: tritn\n    because: typo\n", encoding="utf-8")
    sarif = tmp_path / "out.sarif"
    env = {
        **os.environ,
        "KP_FILES": str(bad),
        "KP_STRICT": "true",
        "KP_SARIF": str(sarif),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    res = subprocess.run(
        ["bash", "-c", step["run"]], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )
    assert res.returncode == 1, res.stderr
    assert any(ln.startswith("::error file=") and "tritn" in ln for ln in res.stdout.splitlines())
    doc = json.loads(sarif.read_text(encoding="utf-8"))
    assert _sarif_errors(doc) == [] and doc["runs"][0]["results"]


def _run_install_step(tmp_path: Path, version: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The action's install step run with *version*, pip and kernelpolicy shimmed: its result
    and the commands it ran."""
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["inputs"]["version"]["default"] == ""
    step = next(s for s in action["runs"]["steps"] if s.get("name") == "install kernelpolicy")
    shims = tmp_path / "bin"
    shims.mkdir()
    for name in ("python", "kernelpolicy"):  # record what pip would be asked to install
        (shims / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{tmp_path}/calls"\n', encoding="utf-8")
        (shims / name).chmod(0o755)
    env = {**os.environ, "KP_VERSION": version, "KP_SOURCE": "<checkout>", "PATH": f"{shims}{os.pathsep}/usr/bin:/bin"}
    res = subprocess.run(["bash", "-c", step["run"]], capture_output=True, text=True, env=env, check=False)
    calls = tmp_path / "calls"
    return res, calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []


def test_the_action_installs_its_own_checkout(tmp_path: Path) -> None:
    res, calls = _run_install_step(tmp_path, "")
    assert res.returncode == 0, res.stderr
    assert calls[0].startswith("python -m pip install") and calls[0].endswith(" <checkout>")
    assert calls[1] == "kernelpolicy --version"


@pytest.mark.parametrize("version", ["0.1.0", ">=0.1,<0.2"])
def test_the_action_never_installs_from_the_package_index(tmp_path: Path, version: str) -> None:
    """kernelpolicy is not on the package index (a package of its name there is someone else's):
    a `version` input stops the job with one error annotation, before pip runs."""
    res, calls = _run_install_step(tmp_path, version)
    assert res.returncode == 1 and calls == []
    (line,) = res.stdout.splitlines()
    assert line.startswith("::error title=kernelpolicy::the `version` input (`" + version + "`) would install")
    assert "not published" in line and "`uses:`" in line


def test_the_action_caches_pip_downloads() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    steps = action["runs"]["steps"]
    names = [s.get("name") for s in steps]
    cache = steps[names.index("pip cache")]
    assert cache["uses"].startswith("actions/cache@") and cache["with"]["path"] == "~/.cache/pip"
    assert "github.action_ref" in cache["with"]["key"] and "inputs.python-version" in cache["with"]["key"]
    assert names.index("pip cache") < names.index("install kernelpolicy")
