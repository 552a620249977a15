"""A `prefer` rule that reorders a path is named wherever the decision is (issue #36).

Found as: an operator `prefer` moving B200 dense from `deep_gemm` to `cutlass`, and the shipped
TP=8 MoE preference, appeared in no `explain` level, no `--json` field, not in `--summary`, and
`matrix` called the result "the first candidate of the path's order"; a `kernelpolicy test` case
could not assert the prefer rule ("among the deciding rules []").
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kernelpolicy.cli import main

ROOT = Path(__file__).resolve().parents[1]
PREFER = "acme-b200-dense-cutlass"
POLICY = f"""\
rules:
  - id: {PREFER}
    when: {{gpu.family: sm100}}
    paths: [dense]
    prefer: [cutlass]
    because: measured faster on our B200 nodes
"""
SHIPPED_TP8 = "deep_gemm-moe-tp8-triton-first"
B200 = ["explain", "--no-env", "--gpu", "B200", "--model", "deepseek-ai/DeepSeek-V3"]


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    f = tmp_path / "acme.yaml"
    f.write_text(POLICY, encoding="utf-8")
    return f


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_without_the_rule_b200_dense_is_deep_gemm(capsys: pytest.CaptureFixture[str]) -> None:
    """The premise: the operator rule is what moves the path."""
    d = json.loads(_run(capsys, *B200, "--json"))
    assert d["paths"]["dense"]["backend"] == "deep_gemm" and "preferred_by" not in d["paths"]["dense"]


def test_explain_text_names_the_prefer_rule(capsys: pytest.CaptureFixture[str], policy: Path) -> None:
    notes = _run(capsys, *B200, "--policy", str(policy))
    assert max(map(len, notes.splitlines())) <= 80
    notes = notes.replace("\n      ", " ")  # the notes' wrapped lines, joined
    assert "dense   cutlass\n" in notes
    assert f"  ^ cutlass first: {PREFER} (prefer): measured faster on our B200 nodes\n" in notes
    full = _run(capsys, *B200, "--policy", str(policy), "--explain=full")
    assert f"  ^ cutlass first: {PREFER} (prefer): measured faster on our B200 nodes\n      {policy}:2\n" in full


def test_explain_json_has_preferred_by(capsys: pytest.CaptureFixture[str], policy: Path) -> None:
    d = json.loads(_run(capsys, *B200, "--policy", str(policy), "--json"))
    dense = d["paths"]["dense"]
    assert dense["backend"] == "cutlass" and dense["preferred_by"] == [PREFER]
    assert d["origins"][PREFER] == f"{policy}:2"
    schema = json.loads((ROOT / "schemas" / "decision.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(d, schema)
    assert "preferred_by" in schema["$defs"]["PathOut"]["properties"]


def test_summary_names_the_prefer_rule(capsys: pytest.CaptureFixture[str], policy: Path) -> None:
    out = _run(capsys, *B200, "--policy", str(policy), "--summary")
    assert f" dense=cutlass [prefer {PREFER}] " in out


def test_the_shipped_tp8_preference_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "--no-env", "--gpu", "B200"]
    serve = ["--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8"]
    assert f" moe=triton [prefer {SHIPPED_TP8}] " in _run(capsys, *argv, "--summary", *serve)
    assert json.loads(_run(capsys, *argv, "--json", *serve))["paths"]["moe"]["preferred_by"] == [SHIPPED_TP8]
    assert f"  ^ triton first: {SHIPPED_TP8} (prefer): at TP=8" in _run(capsys, *argv, "--explain=full", *serve)


def test_an_explicit_choice_that_wins_is_not_credited_to_prefer(
    capsys: pytest.CaptureFixture[str], policy: Path
) -> None:
    out = _run(capsys, *B200, "--policy", str(policy), "--linear-backend", "deep_gemm", "--summary")
    assert " dense=deep_gemm [--linear-backend deep_gemm] " in out and "prefer" not in out


def test_matrix_names_the_prefer_rule(capsys: pytest.CaptureFixture[str], policy: Path) -> None:
    doc = json.loads(_run(capsys, "matrix", "--format", "json", "--policy", str(policy)))
    cell = next(
        c for c in doc["cells"] if c["gpu"] == "NVIDIA B200" and c["model"] == "deepseek-ai/DeepSeek-V3"
        and c["path"] == "dense"
    )  # fmt: skip
    assert cell["backend"] == "cutlass" and cell["rule"] == PREFER and cell["preferred_by"] == [PREFER]
    assert cell["origin"] == f"{policy}:2"
    assert cell["reason"] == "`prefer` puts `cutlass` first: measured faster on our B200 nodes"
    md = _run(capsys, "matrix", "--policy", str(policy))
    assert f"| NVIDIA B200 | sm100 | `cutlass` ({PREFER}) |" in md


def test_a_case_asserts_a_deciding_prefer_rule(
    tmp_path: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = tmp_path / "b200.yaml"
    case.write_text(
        f"given: {{gpu: B200, model: deepseek-ai/DeepSeek-V3, policy: {policy.name}}}\n"
        f"expect: {{dense: cutlass, rules: {{dense: [{PREFER}]}}}}\n",
        encoding="utf-8",
    )
    assert main(["test", str(case)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    case.write_text(
        "given: {gpu: B200, model: deepseek-ai/DeepSeek-V3}\n"
        f"expect: {{dense: deep_gemm, rules: {{dense: [{PREFER}]}}}}\n",
        encoding="utf-8",
    )
    assert main(["test", str(case)]) == 1
    assert f"dense: expected rule(s) ['{PREFER}'] among the deciding rules []" in capsys.readouterr().out
