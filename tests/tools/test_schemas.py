"""JSON Schemas: generated from the models, checked in without drift, and true of real outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")
tomllib = pytest.importorskip("tomllib")

from kernelpolicy.cli import main  # noqa: E402
from kernelpolicy.tools.schemas import SCHEMA_NAMES, generate, render  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHECK_DATA = ROOT / "tests" / "check"


def _validator(name: str) -> Any:
    return jsonschema.Draft202012Validator(generate(name))


def _run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, json.loads(out)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_checked_in_schema_matches_the_models(name: str) -> None:
    path = ROOT / "schemas" / f"{name}.schema.json"
    assert path.read_text(encoding="utf-8") == render(name), (
        f"schemas/{name}.schema.json is out of date: run `kernelpolicy schema --write schemas`"
    )
    jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


def test_schemas_ship_in_the_wheel() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = cfg["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include.get("schemas") == "kernelpolicy/_data/schemas"


def test_schema_command_prints_each(capsys: pytest.CaptureFixture[str]) -> None:
    for name in SCHEMA_NAMES:
        assert main(["schema", name]) == 0
        assert json.loads(capsys.readouterr().out) == generate(name)
    assert main(["schema", "nonsense"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_schema_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--write", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.schema.json" for n in SCHEMA_NAMES)
    assert main(["schema", "--write", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err


def _yaml_files(*roots: Path) -> list[Path]:
    return sorted(p for r in roots for p in r.rglob("*.yaml"))


@pytest.mark.parametrize("path", _yaml_files(ROOT / "rules", ROOT / "policy"), ids=lambda p: p.name)
def test_shipped_rule_files_satisfy_the_rules_schema(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator("rules").iter_errors(data)]
    assert errors == []


@pytest.mark.parametrize(
    ("name", "where", "needle"),
    [
        ("schema-error.yaml", ["rules", 0], "severty"),
        ("unknown-backend.yaml", ["rules", 0, "deny"], "tritn"),
        ("unknown-fact-key.yaml", ["rules", 0, "when"], "gpu.famly"),
    ],
)
def test_rules_schema_catches_what_an_editor_should(name: str, where: list[Any], needle: str) -> None:
    data = yaml.safe_load((CHECK_DATA / name).read_text(encoding="utf-8"))
    errors = list(_validator("rules").iter_errors(data))
    assert [list(e.absolute_path) for e in errors] == [where]
    assert needle in errors[0].message


def test_rules_schema_enums_come_from_the_vocabulary() -> None:
    from kernelpolicy.facts.keys import BACKENDS, FACT_KEYS

    s = generate("rules")
    assert set(s["$defs"]["BackendId"]["enum"]) == {b for v in BACKENDS.values() for b in v}
    assert set(FACT_KEYS) <= set(s["$defs"]["Condition"]["properties"])
    sev = s["$defs"]["RuleSpec"]["properties"]["severity"]
    assert "crash" in json.dumps(sev) and "accuracy" in json.dumps(sev)


DEPLOYMENTS = [
    ["--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"],
    ["--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--env", "VLLM_USE_DEEP_GEMM=1"],
    ["--gpu", "sm120", "--model", "RedHatAI/gemma-4-31B-it-FP8-block", "--engine", "vllm==0.24.0"],
    ["--gpu", "H100", "--model-type", "llama", "--quant", "fp8_tensor"],
]


@pytest.mark.parametrize("argv", DEPLOYMENTS, ids=lambda a: "-".join(a[1::2]))
def test_decision_json_satisfies_its_schema(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, d = _run_json(capsys, "explain", *argv, "--json")
    assert code in (0, 3, 5)  # 5: an explicit choice refused (VLLM_USE_DEEP_GEMM=1 on sm121)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator("decision").iter_errors(d)]
    assert errors == []
    from kernelpolicy import __version__

    assert d["kernelpolicy"] == __version__
    model = argv[argv.index("--model") + 1] if "--model" in argv else None
    assert d["model"] == model


def test_decision_names_the_file_and_line_of_every_rule_that_acted(capsys: pytest.CaptureFixture[str]) -> None:
    _, d = _run_json(capsys, "explain", *DEPLOYMENTS[0], "--json")
    acted = {r for p in d["paths"].values() for c in p["candidates"] for r in c.get("rules", [])}
    acted |= {a["rule"] for a in d["assumptions"]}
    assert acted and acted <= set(d["origins"])
    for rule, where in d["origins"].items():
        file, _, line = where.rpartition(":")
        text = (ROOT / file).read_text(encoding="utf-8").splitlines()[int(line) - 1]
        name = rule.rsplit(".", 1)[-1] if rule.startswith("catalog.") else rule
        assert re.search(rf"\b(id|backend):\s*{re.escape(name)}\b", text), (rule, where, text)


def test_check_json_satisfies_its_schema(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(CHECK_DATA / "base"), str(CHECK_DATA / "dead-rule.yaml")]
    code, d = _run_json(capsys, "check", "--bare", "--json", "--jobs", "1", *files)
    assert code == 0 and d["warnings"] >= 1
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator("check").iter_errors(d)]
    assert errors == []
    code, d = _run_json(capsys, "check", "--bare", "--json", "--no-coverage", str(CHECK_DATA / "schema-error.yaml"))
    assert code == 1 and d["errors"] >= 1 and d["coverage"] == {}
    assert list(_validator("check").iter_errors(d)) == []


def test_facts_json_satisfies_its_schema(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, d = _run_json(capsys, "facts", "--json", "--no-cache")
    assert code == 0
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator("facts").iter_errors(d)]
    assert errors == []


def test_a_broken_output_fails_its_schema(capsys: pytest.CaptureFixture[str]) -> None:
    _, d = _run_json(capsys, "explain", *DEPLOYMENTS[0], "--json")
    del d["paths"]["moe"]
    d["paths"]["dense"]["candidates"][0]["verdict"] = "maybe"
    paths = sorted(tuple(e.absolute_path) for e in _validator("decision").iter_errors(d))
    assert paths == [("paths",), ("paths", "dense", "candidates", 0, "verdict")]
