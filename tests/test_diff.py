"""``kernelpolicy diff OLD NEW``: every cell whose decision changes, grouped and counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelpolicy.analysis.diffing import diff
from kernelpolicy.cli import main
from kernelpolicy.dsl.loader import load_policy
from kernelpolicy.facts.keys import GPU_SMS

BASE = Path(__file__).parent / "check" / "base" / "catalog.yaml"

DENY_TRITON_GB10 = """\
rules:
  - id: triton-crashes-on-gb10
    when: {gpu.sm: sm121}
    deny: triton
    severity: crash
    because: triton crashes on GB10
    refs: [test#1]
"""

PREFER_MARLIN_MOE_FP8 = """\
rules:
  - id: marlin-first-for-fp8-block-moe
    when: {quant.moe_scheme: fp8_block}
    prefer: [marlin]
    paths: [moe]
    because: marlin is faster for FP8 block experts
"""


@pytest.fixture
def sets(tmp_path: Path) -> tuple[Path, Path]:
    old, new = tmp_path / "old", tmp_path / "new"
    for d in (old, new):
        d.mkdir()
        shutil.copy(BASE, d / "catalog.yaml")
    (new / "deny.yaml").write_text(DENY_TRITON_GB10)
    return old, new


def test_a_deny_moves_moe_from_triton_to_marlin(sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, new = sets
    assert main(["diff", "--bare", str(old), str(new)]) == 1
    text = capsys.readouterr().out
    assert "moe: triton -> marlin in 1 cell (1 group)\n  sm121: moe triton -> marlin (1 cell)\n" in text
    assert "dense" not in text  # cutlass comes before triton on dense for sm121: no change
    assert "compared 20 domain cells over 2 dimensions" in text


def test_identical_sets_show_nothing(sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, _ = sets
    assert main(["diff", "--bare", str(old), str(old)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("compared 20 domain cells") and "->" not in text


def test_json_groups_and_counts(sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, new = sets
    (new / "deny.yaml").write_text(PREFER_MARLIN_MOE_FP8)
    assert main(["diff", "--bare", "--json", str(old), str(new)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == "kernelpolicy.diff/1"
    (change,) = out["changes"]
    assert (change["path"], change["old"], change["new"]) == ("moe", "triton", "marlin")
    # every GPU class, only the FP8-block experts: the joint domain splits on quant.moe_scheme
    assert all("quant.moe_scheme=fp8_block" in g["cells"] for g in change["groups"])
    assert change["cells"] == sum(g["count"] for g in change["groups"]) == 10


def test_counts_are_cells_not_groups(sets: tuple[Path, Path]) -> None:
    old, new = sets
    (new / "deny.yaml").write_text(DENY_TRITON_GB10.replace("gpu.sm: sm121", "gpu.family: sm120"))
    report = diff(
        load_policy([old], shipped=False, default_policy=False, environ=False),
        load_policy([new], shipped=False, default_policy=False, environ=False),
    )
    moves = {(c.path, c.old, c.new): c.cells for c in report.changes}
    assert moves == {("moe", "triton", "marlin"): 2}  # sm120 and sm121


def test_bad_input_exits_2(sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, new = sets
    (new / "deny.yaml").write_text(DENY_TRITON_GB10.replace("deny: triton", "deny: tritn"))
    assert main(["diff", "--bare", str(old), str(new)]) == 2
    assert "no path has a backend `tritn`" in capsys.readouterr().err
    assert main(["diff", "--bare", str(old), "no/such/folder"]) == 2


DENY_TRITON_WITHOUT_SF = """\
rules:
  - id: triton-needs-sf-layout
    when: {deep_gemm.has_sm120_sf_layout: false}
    deny: triton
    paths: [moe]
    severity: accuracy
    because: test rule reading an implied fact
    refs: [test#2]
"""


def test_a_change_to_an_implication_alone_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for d, value in ((old, "true"), (new, "false")):
        d.mkdir()
        shutil.copy(BASE, d / "catalog.yaml")
        (d / "deny.yaml").write_text(DENY_TRITON_WITHOUT_SF)
        (d / "implies.yaml").write_text(
            "implies:\n  - id: gb10-sf\n    when: {gpu.sm: sm121}\n"
            f"    set: {{deep_gemm.has_sm120_sf_layout: {value}}}\n"
        )
    assert main(["diff", "--bare", str(old), str(new)]) == 1
    text = capsys.readouterr().out
    assert "moe: triton -> marlin" in text and "sm121" in text
    assert "dense" not in text


def _deny_triton_for(types: str) -> str:
    return (
        "rules:\n  - id: triton-bad-for-some-models\n"
        f"    when: {{model.type: [{types}]}}\n"
        "    deny: triton\n    paths: [moe]\n    severity: crash\n"
        "    because: test rule naming model types\n    refs: [test#3]\n"
    )


def test_cells_the_two_walks_split_differently_are_compared(tmp_path: Path) -> None:
    """Each walk splits `model.type` only as its own rule tells the types apart (old: deepseek_v3
    or not; new: deepseek_v3 or qwen3_moe, or neither): the change in qwen3_moe's cells lies in
    the overlap of two different parts, and counts exactly those cells."""
    old, new = tmp_path / "old", tmp_path / "new"
    for d, types in ((old, "deepseek_v3"), (new, "deepseek_v3, qwen3_moe")):
        d.mkdir()
        shutil.copy(BASE, d / "catalog.yaml")
        (d / "deny.yaml").write_text(_deny_triton_for(types))
    bare = {"shipped": False, "default_policy": False, "environ": False}
    report = diff(load_policy([old], **bare), load_policy([new], **bare))
    moved = [c for c in report.changes if c.path == "moe"]
    assert moved and all((c.old, c.new) == ("triton", "marlin") for c in moved)
    assert all("qwen3_moe" in c.label and "deepseek_v3" not in c.label for c in moved), [c.label for c in moved]
    # qwen3_moe MoE models on every GPU (the rule names none): one cell per SM
    assert sum(c.cells for c in moved) == len(GPU_SMS)


MANY_RULES = """\
rules:
  - id: triton-crashes-on-deepseek
    when: {model.type: deepseek_v3}
    deny: triton
    paths: [moe]
    severity: crash
    because: test rule over model types
    refs: [test#4]
  - id: marlin-wrong-on-old-vllm
    when: {quant.moe_scheme: fp8_block, vllm.version: "<0.12"}
    deny: marlin
    paths: [moe]
    severity: accuracy
    because: test rule over a scheme and a release
    refs: [test#5]
  - id: triton-slow-with-ep
    when: {deploy.ep: ">= 8", triton.version: "<3.4"}
    deny: triton
    paths: [moe]
    severity: perf
    because: test rule over an integer and a version
    refs: [test#6]
  - id: marlin-dense-needs-lora-off
    when: {deploy.lora: true}
    deny: marlin
    paths: [dense]
    severity: support
    because: test rule over a flag
    refs: [test#7]
"""


def test_a_short_listing_keeps_the_counts_exact_and_lists_the_largest(
    sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``diff`` shows ten groups a change: it lists only the largest, and still counts every
    cell and every group (the text says how many it left out)."""
    old, new = sets
    (new / "deny.yaml").write_text(
        DENY_TRITON_GB10.replace(
            "{gpu.sm: sm121}", "{any: [{gpu.sm: sm121}, {gpu.sm: sm90, quant.moe_scheme: fp8_block}]}"
        )
    )
    policies = [load_policy([d], shipped=False, default_policy=False, environ=False) for d in (old, new)]
    whole, short = diff(*policies), diff(*policies, listed=1)
    assert short.totals == whole.totals and short.changed == whole.changed
    for key, (cells, groups) in whole.totals.items():
        everyone = whole.grouped()[key]
        assert sum(c.cells for c in everyone) == cells and len(everyone) == groups
        shown = short.grouped()[key]
        assert shown[0].cells == everyone[0].cells  # the largest group is the one listed
    assert short.unlisted == sum(len(v) for v in whole.grouped().values()) - len(short.changes) > 0
    assert main(["diff", "--bare", str(old), str(new)]) == 1
    assert "more groups (--all lists them)" not in capsys.readouterr().out  # under ten: every one shown
