"""Soundness of what ``kernelpolicy diff`` and ``check FILES`` say about an operator's layer.

Over random layered tables (a shipped catalog, rules, policy ``use`` rules and implications, then
an operator file of random deny, require, prefer and ``use`` rules and implications):

- ``diff`` of the tables below against the layered tables equals a brute-force diff: every
  input cell of the joint domain resolved under both, implications applied as the resolver
  applies them, its path decisions compared, and the cells of each ``path: old -> new`` summed;
- the implication analysis of the layered tables finds a conflict exactly where some input of
  the layered tables is refused for one (an operator implication that fires only on a fact a
  shipped one sets, say).

``KERNELPOLICY_LAYERED_EXAMPLES`` sets the number of random examples (default three times the
suite's ``KERNELPOLICY_PROPERTY_EXAMPLES``; 1,500 for a long run).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from kernelpolicy.analysis.diffing import diff, joint_domain
from kernelpolicy.analysis.domain import build_domain
from kernelpolicy.analysis.implications import implication_conflicts
from kernelpolicy.dsl.loader import SourceFile, load_files
from kernelpolicy.facts import Facts
from kernelpolicy.policy import Policy
from kernelpolicy.resolver import ContradictionError, ImplicationConflict, resolve

from .strategies import MAX_EXAMPLES, SETTINGS, Table, conditions, rule_dicts, tables, write_table
from .test_soundness import _cells, _yaml, implications

pytestmark = pytest.mark.property

#: brute force resolves every input cell twice: keep the joint domains small
MAX_CELLS = 3000
#: per run: three times the property suite's count; ``KERNELPOLICY_LAYERED_EXAMPLES=1500`` for a long run
LAYERED_EXAMPLES = int(os.environ.get("KERNELPOLICY_LAYERED_EXAMPLES", str(3 * MAX_EXAMPLES)))
PATHS = ("dense", "moe", "router")


@st.composite
def operator_file(draw: st.DrawFn, table: Table) -> dict[str, Any]:
    """A random operator policy file about *table*'s catalog."""
    rules = []
    for i in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 3)) == 0:  # an explicit pick, as operators write them
            entry = draw(st.sampled_from(table.catalog["backends"]))
            use: dict[str, Any] = {"id": f"op{i}", "use": entry["backend"], "because": "operator choice"}
            if draw(st.booleans()):
                use["paths"] = [draw(st.sampled_from(entry["paths"]))]
            if draw(st.integers(0, 3)):
                use["when"] = draw(conditions())
            rules.append(use)
            continue
        r = draw(rule_dicts(table.catalog, f"op{i}"))
        if r is not None:
            rules.append(r)
    doc: dict[str, Any] = {"rules": rules}
    imps = draw(implications())
    if imps and draw(st.integers(0, 2)) == 0:
        doc["implies"] = [{**imp, "id": f"op-{imp['id']}"} for imp in imps[:1]]
    return doc


def _files(table: Table, imps: Sequence[dict[str, Any]], op: dict[str, Any], root: Path) -> list[SourceFile]:
    files = write_table(table, root, file_order=None)
    if imps:
        p = root / "implies.yaml"
        p.write_text(_yaml({"implies": list(imps)}))
        files.insert(1, SourceFile(p, "rules/implies.yaml", "shipped"))
    p = root / "operator.yaml"
    p.write_text(_yaml(op))
    return [*files, SourceFile(p, "operator.yaml", "policy")]


#: an operator `use` rule names no path: it is in the scope of the paths its backend is on (the
#: MoE walk must not skip the fp8_block cells off sm90, where it moves MoE from Triton to
#: Marlin), and of no other (the dense and router walks skip every cell)
OPERATOR_USE = (
    Table(
        catalog={
            "backends": [
                {"backend": "cutlass", "paths": ["dense"]},
                {"backend": "triton", "paths": ["moe", "dense"]},
                {"backend": "marlin", "paths": ["moe"]},
                {"backend": "linear", "paths": ["router"]},
            ],
            "engine": {"name": "vllm", "env": []},
        },
        rules=[{"id": "r0", "when": {"gpu.sm": "sm90"}, "deny": "triton", "severity": "crash", "because": "x"}],
    ),
    [],
    {"rules": [{"id": "op0", "when": {"quant.moe_scheme": "fp8_block"}, "use": "marlin", "because": "ours"}]},
)


#: found by the 1,500-example run: an operator implication that fires only on a fact a shipped
#: implication sets (sm90 -> the scale-factor layout, then the operator's "that layout -> no
#: layout") contradicts it on the cells the walk skips; the implication analysis reports it
OPERATOR_CHAINED_CONFLICT = (
    Table(
        catalog={
            "backends": [
                {"backend": "marlin", "paths": ["dense"]},
                {"backend": "vllm_cutlass", "paths": ["moe"]},
                {"backend": "fp32_gemv", "paths": ["router"]},
            ],
            "engine": {"name": "vllm", "env": []},
        },
        rules=[],
    ),
    [{"id": "imp0", "when": {"gpu.family": "sm90"}, "set": {"deep_gemm.has_sm120_sf_layout": True}}],
    {
        "rules": [{"id": "op0", "use": "marlin", "because": "operator choice"}],
        "implies": [
            {
                "id": "op-imp0",
                "when": {"deep_gemm.has_sm120_sf_layout": True},
                "set": {"deep_gemm.has_sm120_sf_layout": False},
            }
        ],
    },
)


#: found by a 450-example run: the shipped policy's two `use` rules contradict on the MoE path,
#: so the resolver refuses those inputs as a whole; the operator's router pick changes nothing
#: there (diff had compared the router path of inputs refused for the MoE path's contradiction)
OPERATOR_USE_BESIDE_A_CONTRADICTION = (
    Table(
        catalog={
            "backends": [
                {"backend": "vllm_cutlass", "paths": ["moe"], "auto": False},
                {"backend": "linear", "paths": ["router"], "auto": False},
                {"backend": "marlin", "paths": ["moe"], "auto": False},
                {"backend": "marlin", "paths": ["dense"]},
            ],
            "engine": {
                "name": "vllm",
                "env": [{"name": "KP_B", "value": "1", "use": "vllm_cutlass", "because": "the deployment sets KP_B=1"}],
            },
        },
        rules=[
            {
                "id": "r0",
                "deny": "vllm_cutlass",
                "refs": ["x#1"],
                "severity": "crash",
                "until": {"deep_gemm.has_sm120_sf_layout": True},
                "because": "random rule r0",
            }
        ],
        policy=[
            {"id": "use0", "use": "vllm_cutlass", "because": "operator choice"},
            {"id": "use1", "use": "marlin", "because": "operator choice"},
        ],
    ),
    [],
    {"rules": [{"id": "op0", "use": "linear", "because": "operator choice"}]},
)


def _decisions(facts: Facts, policy: Policy) -> dict[str, str | None] | None:
    """Each path's backend for the input *facts* (``None``: refused: contradicting choices or implications)."""
    try:
        d = resolve(facts, policy)
    except (ContradictionError, ImplicationConflict):
        return None
    return {p: d.paths[p].backend for p in PATHS if d.paths[p].applicable}


def _brute_diff(base: Policy, layered: Policy) -> dict[tuple[str, str | None, str | None], int]:
    domain = joint_domain(base, layered)
    out: dict[tuple[str, str | None, str | None], int] = {}
    for moe in (True, False):
        dims = [d for d in domain.dims if d.name != "model.is_moe" and not (d.moe_only and not moe)]
        for combo, raw in _cells(domain, moe):
            facts = Facts.from_values(raw, source="user")
            old, new = _decisions(facts, base), _decisions(facts, layered)
            if old is None or new is None:
                continue
            weight = 1
            for d, i in zip(dims, combo, strict=True):
                weight *= d.values[i].weight
            for path in old.keys() & new.keys():
                if old[path] != new[path]:
                    key = (path, old[path], new[path])
                    out[key] = out.get(key, 0) + weight
    return out


@settings(SETTINGS, max_examples=LAYERED_EXAMPLES)
@given(st.data())
@example(None)
@example("contradiction")
def test_diff_of_an_operator_layer_is_the_brute_force_diff(data: st.DataObject | str | None) -> None:
    if data is None:
        table, imps, op = OPERATOR_USE
    elif isinstance(data, str):
        table, imps, op = OPERATOR_USE_BESIDE_A_CONTRADICTION
    else:
        table = data.draw(tables())
        imps = data.draw(implications())
        op = data.draw(operator_file(table))
    with tempfile.TemporaryDirectory(prefix="kp-layered-") as tmp:
        files = _files(table, imps, op, Path(tmp))
        try:
            base, layered = load_files(files[:-1]), load_files(files)
        except Exception as exc:  # a random table the loader refuses is not this test's business
            assume(False)
            raise AssertionError from exc
    domain = joint_domain(base, layered)
    assume(sum(1 for moe in (True, False) for _ in _cells(domain, moe)) <= MAX_CELLS)
    # an input refused for conflicting implications under one side only is a finding of its
    # own (`implies-conflict`), not a change of decision
    assume(not implication_conflicts(base, build_domain(base)) and not implication_conflicts(layered, domain))
    report = diff(base, layered)
    found = {key: sum(c.cells for c in items) for key, items in report.grouped().items()}
    assert found == _brute_diff(base, layered)


@example("chained")
@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 2))
@given(st.data())
def test_an_operator_implication_conflict_is_found_where_brute_force_finds_one(data: st.DataObject | str) -> None:
    if isinstance(data, str):
        table, imps, op = OPERATOR_CHAINED_CONFLICT
    else:
        table = data.draw(tables())
        imps = data.draw(implications())
        op = data.draw(operator_file(table))
    with tempfile.TemporaryDirectory(prefix="kp-layered-") as tmp:
        files = _files(table, imps, op, Path(tmp))
        try:
            layered = load_files(files)
        except Exception as exc:
            assume(False)
            raise AssertionError from exc
    domain = build_domain(layered)
    assume(sum(1 for moe in (True, False) for _ in _cells(domain, moe)) <= MAX_CELLS)
    refused = False
    for moe in (True, False):
        for _, raw in _cells(domain, moe):
            try:
                resolve(Facts.from_values(raw, source="user"), layered)
            except ImplicationConflict:
                refused = True
            except ContradictionError:
                pass
    found = implication_conflicts(layered, domain)
    assert refused == bool(found), [f.message for f in found]
    if isinstance(data, str):  # pointed at the operator's implication
        assert any(f.rule == "op-imp0" for f in found)
