"""The JSON Schemas of `fleet`, `diff`, `matrix` and the audits hold for their real outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import main
from kernelpolicy.facts.gpu import facts_from_spec
from kernelpolicy.tools.schemas import SCHEMA_NAMES, generate

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"


def _errors(name: str, doc: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(generate(name))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def test_every_output_has_a_schema_and_a_command() -> None:
    assert {"fleet", "diff", "matrix", "vllm-audit", "vllm-matrix", "sglang-audit"} <= set(SCHEMA_NAMES)
    for name in SCHEMA_NAMES:
        assert (ROOT / "schemas" / f"{name}.schema.json").is_file(), name


def test_schema_command_prints_the_new_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "fleet"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "kernelpolicy.fleet/1"


def test_fleet_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: kp.Policy) -> None:
    files = []
    for name, gpu in (("h200.json", "H200"), ("spark.json", "GB10")):
        assert main(["facts", "--json", "--no-cache"]) == 0
        data = json.loads(capsys.readouterr().out)
        data["facts"].update(facts_from_spec(gpu, policy.gpus))
        (tmp_path / name).write_text(json.dumps(data))
        files.append(str(tmp_path / name))
    code = main(["fleet", "--model", MODEL, "--json", "--from", *files])
    doc = json.loads(capsys.readouterr().out)
    assert code == doc["exit"] == 0  # two GPU classes, each agrees within itself
    assert [c["gpu_class"] for c in doc["gpu_classes"]] == ["sm90", "sm121"]
    assert _errors("fleet", doc) == []
    bad = {**doc, "exit": 7}
    assert _errors("fleet", bad) != []  # the schema says something


def test_diff_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for d in (old, new):
        d.mkdir()
        shutil.copy(ROOT / "tests" / "check" / "base" / "catalog.yaml", d / "catalog.yaml")
    (new / "deny.yaml").write_text(
        "rules:\n  - id: no-triton-gb10\n    when: {gpu.sm: sm121}\n    deny: triton\n"
        "    severity: crash\n    because: test\n    refs: [test#1]\n"
    )
    assert main(["diff", "--bare", "--json", str(old), str(new)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["changes"] and _errors("diff", doc) == []


def test_matrix_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    assert main(["matrix", "--format", "json", "--out", str(out)]) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["cells"] and _errors("matrix", doc) == []


def test_vllm_audit_json(policy: kp.Policy) -> None:
    """The report `vllm audit --json` prints, from what a probe of vLLM reports (as the audit's
    own tests simulate it), satisfies its schema; `tests/vllm/` runs the real probe."""
    from kernelpolicy.engines.vllm.audit import audit_report
    from kernelpolicy.engines.vllm.conformance import audit_differences
    from kernelpolicy.engines.vllm.testing import _from_result

    decision = kp.resolve(kp.facts_for(gpu="sm121", model=MODEL, policy=policy), policy)
    raw = {
        "dense": {"kernel": "CutlassFp8BlockScaledMMKernel", "scheme": "block"},
        "moe": {"backend": "DEEPGEMM", "experts": "TritonOrDeepGemmExperts", "scheme": "fp8"},
        "warmup": {"gate": True, "dense": False, "moe": True},
        "router": {"backend": "linear", "flags": {}},
        "plugin": None,
        "errors": {},
    }
    native = _from_result(raw, gpu_cc=(12, 1), env={}, moe_backend=None, output="", returncode=0, elapsed=1.0)
    differences = audit_differences(native, decision)
    report = audit_report(MODEL, False, Path("/venv/bin/python"), native, decision, [], differences, 1)
    doc = json.loads(json.dumps(report, default=str))
    assert doc["schema"] == "kernelpolicy.vllm-audit/1"
    assert _errors("vllm-audit", doc) == []
