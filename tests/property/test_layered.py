"""Soundness of the proof that composes: an operator file checked on top of tables it stands on.

``check FILES`` walks only the cells an operator file can change (:mod:`kernelpolicy.analysis.scope`)
and takes every other cell from the proof of the tables below it (their certificate). Two
properties, over random layered tables (a shipped catalog, rules, policy ``use`` rules and
implications, then an operator file of random deny, require, prefer and ``use`` rules and
implications):

- brute force: every cell of the layered domain that the scoped walk leaves out decides, on
  every path, as the tables below decide it (the same backend, the same refusal of contradicting
  explicit picks, the same facts after implications), and every cell it walks lies in one group
  of its path that decides as the cell does;
- the check itself: where the tables below are clean (the only case ``check`` composes), the
  composed check reports the same findings as a check that walks every cell.

``KERNELPOLICY_LAYERED_EXAMPLES`` sets the number of random examples of the first (default three
times the suite's ``KERNELPOLICY_PROPERTY_EXAMPLES``; 1,500 for a long run): each resolves a
random sample of :data:`SAMPLE` cells, or every cell of a smaller domain, twice per path.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from kernelpolicy.analysis.checking import CheckReport, check
from kernelpolicy.analysis.coverage import verify
from kernelpolicy.analysis.domain import build_domain
from kernelpolicy.analysis.implications import implication_conflicts
from kernelpolicy.analysis.scope import delta
from kernelpolicy.dsl.loader import SourceFile, load_files
from kernelpolicy.facts import Facts
from kernelpolicy.policy import Policy
from kernelpolicy.resolver import ContradictionError, ImplicationConflict, apply_implications, resolve_path

from .strategies import MAX_EXAMPLES, SETTINGS, Table, conditions, rule_dicts, tables, write_table
from .test_soundness import _cells, _in_group, _yaml, implications

pytestmark = pytest.mark.property

#: the domains the walk covers (as in test_soundness); brute force resolves a sample of their
#: cells (all of them when there are few), twice per path, so that 1,500 examples stay cheap
MAX_CELLS = 3000
SAMPLE = 80
#: per run: three times the property suite's count (150 in CI, about 1.5 s each on 2 cores);
#: ``KERNELPOLICY_LAYERED_EXAMPLES=1500`` for the issue's long run
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


def _decide(facts: Facts, policy: Policy, path: str) -> object:
    """The path's backend (``False``: the model has no such path), or the contradiction."""
    try:
        pd = resolve_path(facts, policy, path).paths[path]
    except ContradictionError as exc:
        return ("contradiction", str(exc))
    return pd.backend if pd.applicable else False


def _implied(facts: Facts, policy: Policy) -> object:
    try:
        return dict(apply_implications(facts, policy).values)
    except ImplicationConflict:
        return "conflict"


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


@settings(SETTINGS, max_examples=LAYERED_EXAMPLES)
@given(st.data())
@example(None)
@example("chained-conflict")
def test_cells_the_scoped_walk_skips_decide_as_the_tables_below(data: st.DataObject | str | None) -> None:
    if data is None or isinstance(data, str):
        table, imps, op = OPERATOR_USE if data is None else OPERATOR_CHAINED_CONFLICT
        rng = random.Random(0)
    else:
        table = data.draw(tables())
        imps = data.draw(implications())
        op = data.draw(operator_file(table))
        rng = data.draw(st.randoms(use_true_random=False))
    with tempfile.TemporaryDirectory(prefix="kp-layered-") as tmp:
        files = _files(table, imps, op, Path(tmp))
        try:
            base, layered = load_files(files[:-1]), load_files(files)
        except Exception as exc:  # a random table the loader refuses is not this test's business
            assume(False)
            raise AssertionError from exc
    scope = delta(base, layered)
    assert scope is not None and {r.id for r in scope.rules} == {r["id"] for r in op["rules"]}
    domain = build_domain(layered)
    assume(sum(1 for moe in (True, False) for _ in _cells(domain, moe)) <= MAX_CELLS)
    cov = verify(layered, domain, scope=scope)
    below = replace(base, implications=(), digest=base.digest + "+closed")
    core = replace(layered, implications=(), digest=layered.digest + "+closed")
    for moe in (True, False):
        dims = [d for d in domain.dims if d.name != "model.is_moe" and not (d.moe_only and not moe)]
        groups = [pg for pg in cov.results if bool(pg.group.fixed["model.is_moe"].facts["model.is_moe"]) == moe]
        cells = list(_cells(domain, moe))
        for combo, raw in rng.sample(cells, SAMPLE) if len(cells) > SAMPLE else cells:
            cell = {d.name: d.values[i] for d, i in zip(dims, combo, strict=True)}
            facts = Facts.from_values(raw, source="user")
            # a state the resolver decides from: no implication of the layered tables changes it
            # (an input that is not one decides as its completion, a state the walk covers too)
            done = _implied(facts, layered)
            completed = done == "conflict" or done == dict(facts.values)
            for path in PATHS if moe else ("dense",):
                mine = [pg for pg in groups if pg.path == path and _in_group(pg.group.fixed, cell)]
                now = _decide(facts, core, path)
                if mine:
                    assert len(mine) == 1, (path, raw, [pg.group.label() for pg in mine])
                    if mine[0].error is None:
                        assert mine[0].backend == now, (path, raw, mine[0].group.label())
                    continue
                if not completed:
                    continue
                # left out: it decides as the tables below, which leave it as it is too
                assert _decide(facts, below, path) == now, (path, raw)
                if done == "conflict" and _implied(facts, base) != "conflict":
                    # the operator's implications contradict the tables' on this input (one
                    # fires on a fact another sets): no decision is made from it, and the check
                    # reports the contradiction, pointed at the operator's implication, from
                    # the implication analysis over the whole domain (not from the walk)
                    ours = {i["id"] for i in op.get("implies", ())}
                    found = implication_conflicts(layered, domain)
                    assert any(f.rule in ours for f in found), (path, raw, "an unreported operator conflict")
                    continue
                assert _implied(facts, base) == done, (path, raw, "an operator implication fires in a skipped cell")


def _same(report: CheckReport) -> tuple[Any, ...]:
    """What a check found, as the two walks must both find it (the groups a finding names,
    and the rule a hole is blamed on, follow where each walk split the cells first)."""
    out = []
    for f in report.findings:
        rule = None if f.code == "no-backend" else f.rule
        out.append((f.code, f.level, f.file, f.line, rule, f.cells, f.message))
    return tuple(sorted(out, key=repr))


@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 2))
@given(st.data())
def test_a_composed_check_finds_what_a_whole_walk_finds(data: st.DataObject) -> None:
    table = data.draw(tables())
    imps = data.draw(implications())
    op = data.draw(operator_file(table))
    with tempfile.TemporaryDirectory(prefix="kp-layered-") as tmp:
        files = _files(table, imps, op, Path(tmp))
        try:
            load_files(files)
        except Exception as exc:
            assume(False)
            raise AssertionError from exc
        domain = build_domain(load_files(files))
        assume(sum(1 for moe in (True, False) for _ in _cells(domain, moe)) <= 3000)
        subject = ["operator.yaml"]
        composed = check(files, subject=subject, cache=False)
        whole = check(files, subject=subject, cache=False, compose=False)
    assert composed.summary is not None and whole.summary is not None
    assert whole.summary["skipped"] == 0
    assert _same(composed) == _same(whole)
