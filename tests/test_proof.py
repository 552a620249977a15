"""The compiled proof against what runs: the resolver, the old walk, and the limits it keeps.

The decision diagrams (:mod:`kernelpolicy.analysis.compile`) are a model of the resolver, so
they are checked against it the way Cedar checks its symbolic compiler against its evaluator:
thousands of random cells of the shipped tables (with the example operator policy, and with
explicit choices enumerated) are resolved with the real resolver on every run and must get the
outcome the diagram gives them, to the candidates judged before the chosen one. The walk the
proof replaced is kept in ``tests/oracle`` and must agree with the diagram on every group of
cells of two of its tasks.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.analysis.compile import Compiled, Outcome
from kernelpolicy.analysis.coverage import _expected, _said, verify
from kernelpolicy.analysis.domain import build_domain
from kernelpolicy.analysis.mdd import DiagramTooLarge, Manager
from kernelpolicy.cli import main
from kernelpolicy.dsl.loader import discover, load_files
from kernelpolicy.facts import Facts
from kernelpolicy.policy import Policy
from kernelpolicy.resolver import ContradictionError, resolve_path

ROOT = Path(__file__).resolve().parent.parent
FLEET = ROOT / "policy" / "examples" / "fleet.yaml"
#: random cells per run (Cedar's differential random testing, on every CI run)
CELLS = 3000


@pytest.fixture(scope="module")
def layered() -> Policy:
    return load_files(discover([str(FLEET)], environ=False))


def _core(policy: Policy) -> Policy:
    return replace(policy, implications=(), digest=policy.digest + "+closed")


@pytest.mark.parametrize("explicit", [False, True], ids=["defaults", "explicit-choices"])
def test_random_cells_decide_in_the_diagram_as_the_resolver_decides(layered: Policy, explicit: bool) -> None:
    core = _core(layered)
    # within the default node budget: explicit choices are tested first (domain.build_domain)
    c = Compiled(core, build_domain(layered, explicit=explicit), original=layered)
    rng = random.Random(20261205 + explicit)
    seen: set[Any] = set()
    for _ in range(CELLS):
        path = rng.choice(("dense", "moe", "router"))
        kind = rng.choice(c.kinds(path))
        cell = {lv: rng.randrange(n) for lv, n in enumerate(c.m.sizes)} | c.fixed_for(kind)
        o: Outcome = c.m.evaluate(c.outcome(path), cell)
        raw, typed = c.facts(cell)
        facts = Facts._of(dict(raw), dict.fromkeys(raw, "user"), dict(typed))
        try:
            got: Any = resolve_path(facts, core, path)
        except ContradictionError as exc:
            got = exc
        refusing = frozenset(u.id for u in core.unsupported if u.refuse and path in u.paths)
        assert _said(got, path, refusing) == _expected(o), (path, raw)
        seen.add((o.kind, o.explicit is not None))
    # the cells drawn reach choices, holes and explicit picks, not only the defaults
    assert ("chosen", False) in seen and {k for k, _ in seen} >= {"chosen", "none"}
    if explicit:  # and explicit choices taken
        assert ("chosen", True) in seen


def _box(c: Compiled, fixed: dict[str, Any]) -> dict[int, set[int]]:
    """A walk's group as the classes of each level it holds."""
    out: dict[int, set[int]] = {}
    for name, v in fixed.items():
        lv = c.level_of[name]
        out[lv] = {i for i, m in enumerate(c.dims[lv].values) if v.covers(m)}
    return out


def _terminals_in(c: Compiled, n: int, box: dict[int, set[int]]) -> set[Any]:
    """The outcomes *n* takes over the cells of *box* (no node is made)."""
    m, seen, out = c.m, set(), set()
    todo = [n]
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        if m.is_term(x):
            out.add(m.value(x))
            continue
        allowed = box.get(m.level(x))
        todo += [k for i, k in enumerate(m.kids(x)) if allowed is None or i in allowed]
    return out


#: a MoE task whose walk is seconds (the walk enumerates: Hopper's and Blackwell's MoE tasks
#: take minutes at the tables' 77 dimensions, which is why the proof is a diagram)
@pytest.mark.parametrize(("path", "gpu"), [("router", "sm100"), ("moe", "sm80")])
def test_the_old_walk_agrees_with_the_diagram_on_every_group(path: str, gpu: str) -> None:
    """The walk's groups of one task (shipped tables): over each, the diagram takes exactly the
    group's backend; and the cells of each backend add up to the same number."""
    from oracle.walk import _Walker

    policy = load_files(discover(environ=False))
    domain = build_domain(policy)
    core = _core(policy)
    walker = _Walker(core, domain, original=policy)
    task = next(t for t in walker.tasks() if t[0] == path and gpu in domain.dim("gpu.sm").values[t[1]].label.split("|"))
    groups = walker.walk_task(task)
    c = Compiled(core, domain, original=policy)
    outcome = c.outcome(path)
    by_backend: dict[Any, int] = {}
    for pg in groups:
        found = _terminals_in(c, outcome, _box(c, dict(pg.group.fixed)))
        if pg.error is not None:
            assert {o.kind for o in found} == {"contradiction"}, pg.group.label()
            continue
        assert {o.backend for o in found} == {pg.backend}, (pg.group.label(), found, pg.backend)
        by_backend[pg.backend] = by_backend.get(pg.backend, 0) + pg.group.weight
    assert len(groups) > (10 if path == "router" else 5000)
    gi, mi = task[1], task[2]
    fixed = c.fixed_for(mi) | {0: gi}
    weight = domain.dim("gpu.sm").values[gi].weight  # the walk counts each GPU of the class
    counted: dict[Any, int] = {}
    for o, n in c.m.count_by(outcome, fixed).items():
        if o.kind != "contradiction":
            counted[o.backend] = counted.get(o.backend, 0) + n * weight
    assert counted == by_backend


def test_a_diagram_past_its_node_budget_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = load_files(discover([str(FLEET)], environ=False))
    with pytest.raises(DiagramTooLarge) as err:
        verify(policy, budget=2_000)
    assert "passed 2,000 nodes" in str(err.value) and "narrow the conditions" in str(err.value)


def test_the_cli_says_a_budget_error_in_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelpolicy.analysis import checking

    monkeypatch.setattr(checking, "verify", lambda *a, **k: verify(*a, **{**k, "budget": 2_000}))
    monkeypatch.setenv("KERNELPOLICY_NO_CACHE", "1")
    assert main(["check", str(FLEET)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "policy/examples/fleet.yaml" in err[0] and "passed 2,000 nodes" in err[0], err


HOLES = """\
rules:
  - id: ops-no-triton-on-hopper
    when: {gpu.family: sm90}
    deny: triton
    paths: [moe]
    severity: accuracy
    because: ours
  - id: ops-no-marlin-on-hopper
    when: {gpu.family: sm90}
    deny: marlin
    paths: [moe]
    severity: accuracy
    because: ours
  - id: ops-no-cutlass-moe-old-vllm
    when: {vllm.version: "<0.30"}
    deny: vllm_cutlass
    paths: [moe]
    severity: accuracy
    because: ours
  - id: ops-no-deep_gemm-moe-with-ep
    when: {deploy.ep: ">= 2"}
    deny: deep_gemm
    paths: [moe]
    severity: accuracy
    because: ours
"""


def test_an_operator_file_that_leaves_holes_is_proven_with_exact_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four rules that leave holes on the MoE path (the walk grew past 5.9 GB on such a file
    and was killed): the proof finds the hole at once, counts its cells exactly and names a box."""
    monkeypatch.setenv("KERNELPOLICY_NO_CACHE", "1")
    ops = tmp_path / "holes.yaml"
    ops.write_text(HOLES)
    assert main(["check", "--json", str(ops)]) == 1
    import json

    out = json.loads(capsys.readouterr().out)
    holes = [f for f in out["findings"] if f["code"] == "no-backend"]
    assert holes and all(f["file"] == str(ops) for f in holes)
    assert all(f["cells"] > 10**20 and "sm90" in f["cell"] for f in holes), holes
    assert out["coverage"]["nodes"]["moe"] > 0


def test_kept_diagrams_are_checked_for_their_structure() -> None:
    m = Manager([2, 3])
    a = m.var(0, [True, False])
    b = m.var(1, ["x", "y", "x"])
    data = m.export({"a": a, "both": m.apply2("pair", lambda p, q: (p, q), a, b)})
    again = Manager([2, 3])
    roots = again.load(data)
    assert again.evaluate(roots["both"], {0: 0, 1: 1}) == (True, "y")
    for broken, why in (
        ({**data, "sizes": [2, 2]}, "not this manager's"),
        ({**data, "nodes": [*data["nodes"], [0, [99, 0]]]}, "a child not before it"),
        ({**data, "roots": {"a": 12345}}, "names no node"),
    ):
        with pytest.raises(ValueError, match=why):
            Manager([2, 3]).load(broken)


def _random_bool(m: Manager, rng: random.Random, depth: int = 3) -> int:
    """A random boolean diagram over *m*'s levels: random literals combined with and/or/not."""
    n = m.true
    for _ in range(depth):
        lv = rng.randrange(len(m.sizes))
        x = m.var(lv, [rng.random() < 0.5 for _ in range(m.sizes[lv])])
        n = rng.choice([m.AND, m.OR])(n, x if rng.random() < 0.5 else m.NOT(x))
    return n


def test_conjunctions_read_without_building_them_agree_with_brute_force() -> None:
    """``meets`` and ``count_all`` (rule usage's questions) against every cell, on random diagrams."""
    rng = random.Random(7)
    for _ in range(60):
        sizes = [3, 2, 3, 2]
        weights = [[rng.randint(1, 3) for _ in range(k)] for k in sizes]
        m = Manager(sizes, weights)
        lits = [(_random_bool(m, rng), rng.random() < 0.6) for _ in range(rng.randint(1, 4))]
        enc = [n if want else ~n for n, want in lits]
        fixed = {1: 0} if rng.random() < 0.5 else {}
        cells = [dict(enumerate(cell)) for cell in itertools.product(*(range(k) for k in sizes))]
        hits = [cell for cell in cells if all(m.evaluate(n, cell) is want for n, want in lits)]
        assert m.meets(enc) == bool(hits)
        counted = sum(
            weights[0][c[0]] * weights[2][c[2]] * weights[3][c[3]] * (1 if fixed else weights[1][c[1]])
            for c in hits
            if not fixed or c[1] == 0
        )
        assert m.count_all(enc, fixed) == counted
        if len(lits) == 1 and lits[0][1]:
            assert m.count(lits[0][0], fixed) == counted == m.count_by(lits[0][0], fixed).get(True, 0)
        some = lits[0][0]
        assert m.where(some, bool, ("any", some), m.reach(some)) == some


def _random_indexed(m: Manager, rng: random.Random, classes: int) -> int:
    """A random diagram whose terminals are class indices below *classes*."""
    n = m.term(rng.randrange(classes))
    for _ in range(3):
        n = m.ite(_random_bool(m, rng, 2), m.term(rng.randrange(classes)), n)
    return n


def test_select_reads_in_each_cell_the_option_the_selector_names() -> None:
    """``select`` (the substitution under the implication closure) against every cell."""
    rng = random.Random(11)
    sizes = [3, 2, 3, 2]
    cells = [dict(enumerate(cell)) for cell in itertools.product(*(range(k) for k in sizes))]
    for _ in range(60):
        m = Manager(sizes)
        options = [_random_bool(m, rng) for _ in range(3)]
        sel = _random_indexed(m, rng, len(options))
        got = m.select(sel, options)
        for cell in cells:
            assert m.evaluate(got, cell) == m.evaluate(options[m.evaluate(sel, cell)], cell)


def test_switch_reads_in_each_cell_the_option_of_the_selectors_value() -> None:
    """``switch`` (how a path's outcome joins what each pair of picks and order decides)
    against every cell; an option is never read where its value is not the selector's (there
    it may be anything), and it is the chain of if-then-elses it replaced, node for node."""
    rng = random.Random(17)
    sizes = [3, 2, 3, 2]
    cells = [dict(enumerate(cell)) for cell in itertools.product(*(range(k) for k in sizes))]
    for _ in range(60):
        m = Manager(sizes)
        names = ["a", "b", "c", "d"]
        sel = m.apply1("named", names.__getitem__, _random_indexed(m, rng, len(names)))
        reach = m.reach(sel)
        options = {v: _random_bool(m, rng) for v in rng.sample(names, len(names))}
        got = m.switch(sel, options, reach)
        for cell in cells:
            assert m.evaluate(got, cell) == m.evaluate(options[m.evaluate(sel, cell)], cell)
        chain = m.false
        for v in reach[sel]:
            chain = m.ite(m.among(sel, frozenset({v}), reach), options[v], chain)
        assert got == chain
        # options of values the selector never gives are never read
        assert m.switch(sel, {**options, "never": -1}, reach) == got


def test_the_largest_boxes_come_first_and_are_the_boxes_cubes_makes() -> None:
    """``largest_cubes`` yields the boxes of ``cubes`` (the same partition), largest first."""
    rng = random.Random(13)
    sizes = [3, 2, 3, 2]
    for _ in range(60):
        weights = [[rng.randint(1, 5) for _ in range(k)] for k in sizes]
        m = Manager(sizes, weights)
        n = _random_indexed(m, rng, 3)

        every = sorted(
            ((_box_cells(weights, b), sorted(b.items()), v) for b, v in m.cubes(n, lambda v: v != 0)), reverse=True
        )
        assert m.count_cubes(n, lambda v: v != 0) == len(every)
        for limit in (1, 3, len(every) + 1):
            top = [
                (_box_cells(weights, b), sorted(b.items()), v) for b, v in m.largest_cubes(n, lambda v: v != 0, limit)
            ]
            assert [c for c, _, _ in top] == [c for c, _, _ in every[:limit]]
            assert all(box in every for box in top)


def _box_cells(weights: list[list[int]], box: dict[int, tuple[int, ...]]) -> int:
    total = 1
    for lv, ws in enumerate(weights):
        total *= sum(ws[i] for i in box.get(lv, range(len(ws))))
    return total
