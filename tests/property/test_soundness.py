"""Soundness of ``kernelpolicy check``: what it reports equals what brute force finds.

For random small rule tables (a catalog, deny/require/prefer rules, policy ``use`` rules, engine
env entries, and implications), every cell of the finite domain is resolved one by one with the
real resolver, implications applied (the inputs a deployment can give), and judged with the
oracles of :mod:`.strategies`, which restate the documented semantics independently of
:mod:`kernelpolicy.semantics`. ``check``'s exhaustive walk must report exactly:

- the cells where a path has no valid backend (each reported group holds such a cell, and
  every such input's completed state lies in a reported group),
- the cells where a chosen backend is denied, or warmup warms other than what the paths run
  (none, for a correct resolver: brute force and the walk must both find none),
- order dependence: an input whose decision differs, or is refused, when the files load in
  another order exists exactly when ``check`` reports an ``implies-conflict``.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from kernelpolicy.analysis.coverage import Coverage, verify
from kernelpolicy.analysis.domain import Dimension, Domain, ValueClass, build_domain
from kernelpolicy.analysis.implications import implication_conflicts
from kernelpolicy.decision import Decision
from kernelpolicy.dsl import conditions as _conditions
from kernelpolicy.dsl.loader import SourceFile, load_files
from kernelpolicy.facts import Facts
from kernelpolicy.policy import Policy
from kernelpolicy.resolver import ContradictionError, ImplicationConflict, resolve, resolve_path

from .strategies import KEY_VALUES, SETTINGS, Table, conditions, rejections, tables, write_table

pytestmark = pytest.mark.property

#: brute force resolves every cell: keep the domains small
MAX_CELLS = 3000
#: keys random implications may set (values from KEY_VALUES)
IMPLIED = ("deep_gemm.has_sm120_sf_layout", "host.machine", "triton.version")


@st.composite
def implications(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(IMPLIED))
        imp: dict[str, Any] = {
            "id": f"imp{i}",
            "when": draw(conditions()),
            "set": {key: draw(st.sampled_from(KEY_VALUES[key]))},
        }
        if draw(st.integers(0, 3)) == 0:
            imp["unless"] = draw(conditions())
        out.append(imp)
    return out


def _load(table: Table, imps: Sequence[dict[str, Any]], *, reverse: bool = False) -> Policy:
    with tempfile.TemporaryDirectory(prefix="kp-sound-") as tmp:
        files = write_table(table, Path(tmp), file_order=None)
        # the implications in two files, so that file order can matter
        for i, part in enumerate((imps[::2], imps[1::2])):
            p = Path(tmp) / f"implies{i}.yaml"
            p.write_text(_yaml({"implies": list(part)}))
            files.insert(1, SourceFile(p, f"rules/implies{i}.yaml", "shipped"))
        if reverse:
            files = [files[0], *reversed(files[1:])]
        return load_files(files)


def _yaml(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


# --------------------------------------------------------------------------- the brute force


def _cells(domain: Domain, moe: bool) -> Iterator[tuple[tuple[int, ...], dict[str, Any]]]:
    dims = [d for d in domain.dims if d.name != "model.is_moe" and not (d.moe_only and not moe)]
    for combo in itertools.product(*(range(len(d.values)) for d in dims)):
        raw: dict[str, Any] = {"model.is_moe": moe}
        for d, i in zip(dims, combo, strict=True):
            raw.update(d.values[i].facts)
        if moe:
            raw.setdefault("quant.moe_scheme", raw.get("quant.scheme"))
        else:
            raw.pop("quant.moe_scheme", None)
        yield combo, {k: v for k, v in raw.items() if v is not None}


def _classify(domain: Domain, facts: Mapping[str, Any], moe: bool) -> dict[str, ValueClass]:
    """The class of each dimension a completed state falls in."""
    typed = Facts.from_values(dict(facts)).typed()
    tests: dict[str, list[Any]] = {}
    for _, _, c in domain.conditions:
        for t in _conditions.tests_of(c):
            tests.setdefault(t.key, []).append(t)
    out: dict[str, ValueClass] = {}
    for d in domain.dims:
        if d.moe_only and not moe:
            continue
        out[d.name] = _class_of(d, typed, tests)
    return out


def _class_of(d: Dimension, typed: Mapping[str, Any], tests: Mapping[str, list[Any]]) -> ValueClass:
    key = d.keys[0]
    if key not in typed:
        return next(v for v in d.values if not v.facts or key not in v.facts)
    mine = [t for k in d.keys for t in tests.get(k, [])]

    def sig(values: Mapping[str, Any]) -> tuple[bool, ...]:
        return tuple(t.match(values[t.key]) if t.key in values else False for t in mine)

    want = sig(typed)
    found = next((v for v in d.values if v.typed and sig(v.typed) == want), None)
    if found is None:  # a value no test matches, merged with *unknown* (``x|unknown``)
        assert not any(want), (d.name, typed)
        found = next(v for v in d.values if not v.facts)
    return found


def _in_group(fixed: Mapping[str, ValueClass], cell: Mapping[str, ValueClass]) -> bool:
    return all(name in cell and v.covers(cell[name]) for name, v in fixed.items() if name != "model.is_moe")


def _denied_chosen(d: Decision, path: str, policy: Policy) -> bool:
    pd = d.paths[path]
    if pd.backend is None or pd.explicit is not None:
        return False
    return bool(rejections(pd.backend, path, policy, d.facts))


def _warmup_wrong(d: Decision, path: str, policy: Policy) -> bool:
    mine = {k for k in d.warmup if k.endswith(f".{path}")}
    return any(k != f"{d.paths[path].backend}.{path}" for k in mine)


def _reported(cov: Coverage, code: str, path: str, moe: bool) -> list[Mapping[str, ValueClass]]:
    return [
        pg.group.fixed
        for pg in cov.results
        if pg.path == path
        and bool(pg.group.fixed["model.is_moe"].facts["model.is_moe"]) == moe
        and any(v.code == code for v in pg.violations)
    ]


#: Found by a long run: the router's two `use` rules contradict, so the resolver decides nothing
#: for any deployment, and the dense path (only an explicit-only backend) must not be reported
#: as a hole there (each path is walked alone; the other paths' picks still refuse the cell).
CONTRADICTING_PICKS_ELSEWHERE = Table(
    catalog={
        "backends": [
            {"backend": "cublas", "paths": ["router"], "auto": False},
            {"backend": "cutlass", "paths": ["dense"], "auto": False},
            {"backend": "linear", "paths": ["router"], "auto": False},
            {"backend": "vllm_cutlass", "paths": ["moe"]},
        ],
        "engine": {"name": "vllm", "env": []},
    },
    rules=[],
    policy=[
        {"id": "use0", "use": "cublas", "because": "operator choice"},
        {"id": "use1", "use": "linear", "because": "operator choice"},
    ],
    rule_files=1,
)

#: Found by a long run: `host.machine` is read only where a condition counts when true, so the
#: domain merged *unknown* with `aarch64`; but an implication sets it while unknown, so the
#: merged class held a closed state (aarch64, a dense hole) and one that is not (unknown).
IMPLIED_KEY_READ_LOOSELY = (
    Table(
        catalog={
            "backends": [
                {"backend": "cublas", "paths": ["router"], "auto": False},
                {"backend": "triton", "paths": ["dense"], "auto": False},
                {"backend": "vllm_cutlass", "paths": ["moe"]},
            ],
            "engine": {"name": "vllm", "env": [{"name": "KP_B", "value": "1", "use": "cublas", "because": "KP_B=1"}]},
        },
        rules=[],
    ),
    [
        {
            "id": "imp0",
            "when": {
                "any": [
                    {"deep_gemm.has_sm120_sf_layout": True},
                    {"deep_gemm.has_sm120_sf_layout": True, "host.machine": "x86_64"},
                ]
            },
            "set": {"host.machine": "aarch64"},
        }
    ],
)


@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 2))
@given(tables(), implications())
@example(CONTRADICTING_PICKS_ELSEWHERE, [])
@example(*IMPLIED_KEY_READ_LOOSELY)
def test_check_reports_what_brute_force_finds(table: Table, imps: list[dict[str, Any]]) -> None:
    try:
        policy = _load(table, imps)
    except Exception as exc:  # a random table the loader refuses is not this test's business
        assume(False)
        raise AssertionError from exc
    domain = build_domain(policy)
    assume(sum(1 for moe in (True, False) for _ in _cells(domain, moe)) <= MAX_CELLS)
    reverse = _load(table, imps, reverse=True)
    cov = verify(policy, domain)
    conflicts = implication_conflicts(policy, domain)

    order_dependent = False
    for moe in (True, False):
        holes = {p: _reported(cov, "no-backend", p, moe) for p in ("dense", "moe", "router")}
        found_holes: dict[str, bool] = dict.fromkeys(holes, False)
        for _, raw in _cells(domain, moe):
            facts = Facts.from_values(raw)
            a = _outcome(facts, policy)
            b = _outcome(facts, reverse)
            if isinstance(a, ImplicationConflict) or isinstance(b, ImplicationConflict) or _what(a) != _what(b):
                order_dependent = True
            if not isinstance(a, Decision):
                continue
            state = _classify(domain, a.facts.values, moe)
            for path in ("dense", "moe", "router"):
                pd = a.paths[path]
                if not pd.applicable:
                    continue
                if pd.backend is None:
                    found_holes[path] = True
                    # every input without a backend lies, completed, in a reported hole
                    assert any(_in_group(g, state) for g in holes[path]), (path, raw, a.facts.values)
                else:
                    assert not any(_in_group(g, state) for g in holes[path]), (path, raw, "reported, has backend")
                assert not _denied_chosen(a, path, policy), (path, raw)
                assert not _warmup_wrong(a, path, policy), (path, raw)
        for path, groups in holes.items():
            # no reported hole without a cell that brute force finds without a backend
            assert not groups or found_holes[path], (path, groups)
    assert not [v for v in cov.violations if v.code in ("denied-chosen", "warmup", "unmet-requirement")]
    assert order_dependent == bool(conflicts), (order_dependent, [f.message for f in conflicts])


def _what(outcome: Decision | Exception) -> object:
    """What an outcome decides (a decision's digest names its files in load order: left out)."""
    if isinstance(outcome, Decision):
        return tuple((p, pd.backend, pd.kernels) for p, pd in outcome.paths.items())
    return (type(outcome).__name__, str(outcome))


def _outcome(facts: Facts, policy: Policy) -> Decision | ImplicationConflict | ContradictionError:
    try:
        return resolve(facts, policy)
    except ImplicationConflict as exc:
        return exc
    except ContradictionError as exc:
        return exc


@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 2))
@given(tables(), implications())
def test_every_cell_of_a_group_decides_as_the_group(table: Table, imps: list[dict[str, Any]]) -> None:
    """The walk joins parts of a split over which every pending verdict is settled alike (a
    backend rejected by one rule here and another there): each cell of every group it reports,
    resolved on its own as the walk resolves states (implications taken out), chooses the
    group's backend, and lies in exactly one group of its path."""
    try:
        policy = _load(table, imps)
    except Exception as exc:
        assume(False)
        raise AssertionError from exc
    domain = build_domain(policy)
    assume(sum(1 for moe in (True, False) for _ in _cells(domain, moe)) <= MAX_CELLS)
    cov = verify(policy, domain)
    core = replace(policy, implications=(), digest=policy.digest + "+closed")
    for moe in (True, False):
        dims = [d for d in domain.dims if d.name != "model.is_moe" and not (d.moe_only and not moe)]
        groups = [pg for pg in cov.results if bool(pg.group.fixed["model.is_moe"].facts["model.is_moe"]) == moe]
        for combo, raw in _cells(domain, moe):
            cell = {d.name: d.values[i] for d, i in zip(dims, combo, strict=True)}
            try:
                decision: Decision | None = resolve(Facts.from_values(raw, source="user"), core)
            except ContradictionError:
                decision = None
            for path in ("dense", "moe", "router"):
                mine = [pg for pg in groups if pg.path == path and _in_group(pg.group.fixed, cell)]
                if decision is None or not decision.paths[path].applicable:
                    continue
                assert len(mine) == 1, (path, raw, [pg.group.label() for pg in mine])
                assert mine[0].backend == decision.paths[path].backend, (path, raw, mine[0].group.label())


def _brute_usage(policy: Policy, domain: Domain) -> dict[str, tuple[bool, bool, bool]]:
    """Each deny/require rule's usage, cell by cell: it *fires* where it takes effect on a
    candidate the resolver judged before the one it chose (a refused path: every candidate),
    *sole* where it is the only rule of that candidate that does and the candidate's catalog
    requirement is not false, *first* where no graver rule of the candidate takes effect there."""
    from kernelpolicy.dsl.conditions import evaluate
    from kernelpolicy.semantics import gravity, met, rule_state, takes_effect

    core = replace(policy, implications=(), digest=policy.digest + "+closed")
    out: dict[str, tuple[bool, bool, bool]] = {}
    for moe in (True, False):
        for _, raw in _cells(domain, moe):
            facts = Facts.from_values(raw, source="user")
            typed = facts.typed()
            for path in ("dense", "moe", "router"):
                try:
                    pd = resolve_path(facts, core, path).paths[path]
                except ContradictionError:
                    continue
                if not pd.applicable:
                    continue
                cands = list(pd.candidates)
                if pd.explicit is not None:
                    cands = cands[1:]
                for c in cands:
                    if c.verdict == "chosen":
                        break
                    rules = core.rules_for(c.backend, path)
                    effect = {
                        r.id: takes_effect(
                            r.kind,
                            r.severity,
                            rule_state(
                                evaluate(r.when, typed), evaluate(r.until, typed) if r.until is not None else None
                            ),
                            evaluate(r.require, typed) if r.kind == "require" else True,
                        )
                        for r in rules
                    }
                    runs = met(evaluate(core.backends[path][c.backend].requires, typed))
                    for r in rules:
                        if not effect[r.id]:
                            continue
                        sole = runs and not any(effect[t.id] for t in rules if t.id != r.id)
                        first = runs and not any(
                            effect[t.id] for t in rules if gravity(t.severity) < gravity(r.severity)
                        )
                        was = out.get(r.id, (False, False, False))
                        out[r.id] = (True, was[1] or sole, was[2] or first)
    return out


@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 2))
@given(tables(), implications())
def test_rule_usage_is_exactly_what_brute_force_finds(table: Table, imps: list[dict[str, Any]]) -> None:
    """What ``dead`` and ``shadowed`` read (:class:`~kernelpolicy.analysis.coverage.Usage`) is
    exact: each rule fires, alone, or first in a cell exactly where resolving every cell says so
    (the walk took rule effects over a group as independent, and over-approximated)."""
    try:
        policy = _load(table, imps)
    except Exception as exc:
        assume(False)
        raise AssertionError from exc
    domain = build_domain(policy)
    assume(sum(1 for moe in (True, False) for _ in _cells(domain, moe)) <= MAX_CELLS)
    cov = verify(policy, domain)
    found = {rid: (u.fires, u.sole, u.first) for rid, u in cov.usage.items() if u.fires}
    assert found == _brute_usage(policy, domain)
