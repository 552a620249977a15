"""The SGLang conformance sweep on every SGLang release the tests install: real SGLang code on
simulated sm90, sm100, sm120 and sm121, alone, with the plugin and with the flags ``explain``
prints; ``docs/sglang-conformance.md`` holds the table and must be what the sweep gives."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.cli._sglang import _target_facts
from kernelpolicy.engines.conformance import FAMILIES
from kernelpolicy.engines.sglang.conformance import CellResult, _failure, render_markdown, run_matrix, section_of
from kernelpolicy.releases.sglang.flags import moe_ids_of

from .conftest import RELEASES, venv_python

pytestmark = pytest.mark.sglang

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "sglang-conformance.md"


@cache
def _sweep(version: str) -> tuple[list[CellResult], str]:
    python = venv_python(version)
    policy = kp.load_policy()
    target = _target_facts(python)
    results = run_matrix(python, policy, [m.id for m in policy.models], list(FAMILIES), target)
    return results, render_markdown(str(target["sglang.version"]), results, moe_ids_of(policy.engines["sglang"]))


@pytest.mark.parametrize("version", RELEASES)
def test_the_conformance_table_is_what_sglang_does(version: str) -> None:
    _results, section = _sweep(version)
    assert section_of(DOC.read_text(encoding="utf-8"), version) == section, (
        f"run `kernelpolicy sglang audit --matrix --sglang {version} --markdown docs/sglang-conformance.md`"
    )


@pytest.mark.parametrize("version", RELEASES)
def test_the_plugin_never_stops_a_start_up_sglang_manages_alone(version: str) -> None:
    results, _section = _sweep(version)
    broken = [
        f"{x.model} on {x.family}: {_failure(x.patched, x.decision)}"
        for x in results
        if _failure(x.native, x.decision) is None and _failure(x.patched, x.decision) is not None
    ]
    assert broken == []


@pytest.mark.parametrize("version", RELEASES)
def test_the_plugin_logs_the_fingerprint_explain_prints(version: str) -> None:
    results, _section = _sweep(version)
    decided = [x for x in results if x.parity is not None]
    assert len(decided) > len(results) // 2
    assert [f"{x.model} on {x.family}" for x in decided if not x.parity] == []


@pytest.mark.parametrize("version", RELEASES)
def test_audit_json_satisfies_its_schema(version: str) -> None:
    """`sglang audit --json` (its cells, as the command writes them) fits `sglang-audit`."""
    import json

    jsonschema = pytest.importorskip("jsonschema")
    from kernelpolicy.tools.schemas import generate

    results, _section = _sweep(version)
    data = {"schema": "kernelpolicy.sglang-audit/1", "sglang": version, "cells": [r.to_dict() for r in results]}
    doc = json.loads(json.dumps(data, default=str))
    validator = jsonschema.Draft202012Validator(generate("sglang-audit"))
    assert [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)] == []
