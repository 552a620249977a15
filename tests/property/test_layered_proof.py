"""The proof of an operator's layer on the shipped tables' proof is the proof compiled whole.

Over random layered tables (:mod:`.test_layered`'s: a shipped catalog, rules, policy ``use``
rules and implications, then an operator file of random deny, require, prefer and ``use`` rules
and implications), :mod:`kernelpolicy.analysis.layered` puts the operator's layer on the
shipped files' proof:

- each path's outcome diagram is the one a compile from scratch makes (the same node of one
  manager: the same function of every cell), whatever the layer refines of the domain;
- ``check`` of the operator file says the same findings, word for word, as it says with the
  layered proof turned off;
- the manager the last layer was proven in is used again for the next one where the domain is
  the same, and the answer is still the whole compile's (the language server's edit loop).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, example, given, settings
from hypothesis import strategies as st

from kernelpolicy.analysis import checking, layered
from kernelpolicy.analysis.compile import Compiled
from kernelpolicy.analysis.coverage import PATHS
from kernelpolicy.analysis.diffing import diff
from kernelpolicy.analysis.domain import build_domain
from kernelpolicy.dsl.loader import SourceFile, load_files
from kernelpolicy.policy import Policy
from kernelpolicy.semantics import ImplicationConflict

from .strategies import SETTINGS, tables
from .test_layered import OPERATOR_USE, _files, operator_file
from .test_soundness import implications

pytestmark = pytest.mark.property


@contextlib.contextmanager
def _written(data: st.DataObject | None) -> Iterator[tuple[dict[str, Any], Path, list[SourceFile]]]:
    """Layered tables written to a folder of their own: random ones drawn from *data*
    (``None``: :data:`OPERATOR_USE`); their operator file, the folder and the files in load
    order. Tables the loader refuses are assumed away."""
    if data is None:
        table, imps, op = OPERATOR_USE
    else:
        table = data.draw(tables())
        imps, op = data.draw(implications()), data.draw(operator_file(table))
    with tempfile.TemporaryDirectory(prefix="kp-layered-proof-") as tmp:
        files = _files(table, imps, op, Path(tmp))
        _loaded(files)
        yield op, Path(tmp), files


def _loaded(files: list[SourceFile]) -> Policy:
    """The layered tables of *files*; a random table the loader refuses is not these tests' business."""
    try:
        return load_files(files)
    except Exception as exc:
        assume(False)
        raise AssertionError from exc


def _base(files: list[SourceFile]) -> layered.Base:
    base = checking.ground_proof(files, load_files(files), ["operator.yaml"], cache=False, compute=True)
    assert base is not None
    return base


def _outcomes_agree(files: list[SourceFile], base: layered.Base) -> bool:
    """Whether the layered compile of *files* on *base* takes each path's whole-compile node;
    ``False`` where the layer cannot stand on the base (then nothing is compared)."""
    policy = load_files(files)
    core = replace(policy, implications=(), digest=policy.digest + "+closed")  # as the proof decides
    domain = build_domain(policy)
    whole = Compiled(core, domain, original=policy)
    mine = Compiled(core, domain, original=policy, manager=whole.m)
    if not layered.layer(base, mine):
        return False
    for path in PATHS:
        assert mine.outcome(path) == whole.outcome(path), path
    return True


@settings(SETTINGS)
@given(st.data())
@example(None)
def test_a_layer_on_the_shipped_proof_decides_every_cell_as_the_whole_compile(data: st.DataObject | None) -> None:
    with _written(data) as (_, _, files):
        stood = _outcomes_agree(files, _base(files))
    event(f"the layer stood on the shipped proof: {stood}")
    if data is None:  # a layer of operator rules alone always does
        assert stood


@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 2))
@given(st.data())
@example(None)
def test_check_of_an_operator_file_says_what_the_whole_proof_says(data: st.DataObject | None) -> None:
    with _written(data) as (_, _, files):
        on = checking.check(files, subject=["operator.yaml"], cache=False, layer=True)
        off = checking.check(files, subject=["operator.yaml"], cache=False, layer=False)
    assert [f.render() for f in on.findings] == [f.render() for f in off.findings]
    assert on.summary is not None and off.summary is not None
    assert on.summary["nodes"] == off.summary["nodes"]


def test_the_next_edit_reads_the_manager_the_last_one_left() -> None:
    """Two edits of one operator rule on one domain: the second is proven in the first one's
    manager, and decides every cell as the whole compile does."""
    with _written(None) as (op, tmp, files):
        base = _base(files)
        first = checking.check(files, subject=["operator.yaml"], cache=False, layer=True)
        assert first.coverage is not None and first.coverage.compiled is not None
        manager = first.coverage.compiled.m
        rule = op["rules"][0]
        edited = {"rules": [{**rule, "because": "ours, still"}, {**rule, "id": "op1", "use": "triton"}]}
        (tmp / "operator.yaml").write_text(json.dumps(edited))
        second = checking.check(files, subject=["operator.yaml"], cache=False, layer=True)
        assert second.coverage is not None and second.coverage.compiled is not None
        assert second.coverage.compiled.m is manager
        assert second.coverage.compiled.base is not None  # proven on the shipped proof
        assert _outcomes_agree(files, base)
        whole = Compiled(
            second.coverage.compiled.policy, second.coverage.domain, original=None, manager=manager
        )  # the whole compile, in the same manager: the same nodes
        for path in PATHS:
            assert whole.outcome(path) == second.coverage.compiled.outcome(path), path


@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 2))
@given(st.data())
@example(None)
def test_diff_on_the_ground_proof_lists_the_changes_of_the_whole_diff(data: st.DataObject | None) -> None:
    with _written(data) as (_, _, files):
        old, new = _loaded(files[:-1]), _loaded(files)
        base = _base(files)
    assert _changes(lambda: diff(old, new, base=base)) == _changes(lambda: diff(old, new))


def _changes(run: Callable[[], Any]) -> list[tuple[object, ...]] | str:
    """A diff's changes, or the one line it refuses with (random implications may contradict
    each other: then both diffs must refuse alike)."""
    try:
        result = run()
    except ImplicationConflict as exc:
        return str(exc)
    return [(c.path, c.old, c.new, c.label, c.cells) for c in result.changes]
