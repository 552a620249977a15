"""Every order and preference names the engine (and release window) it holds for: the orders
generated from vLLM's wheels per window of releases, and the loader's refusal of a shipped order
or ``prefer`` that names no engine."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy._paths import shipped_rules_dir
from kernelpolicy.cli import main
from kernelpolicy.dsl._source import SourceFile
from kernelpolicy.dsl.loader import load_files
from kernelpolicy.errors import PolicyError
from kernelpolicy.releases.vllm import versions as _versions
from kernelpolicy.releases.vllm.generate import dense_orders

RECORDS = _versions.release_records()


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(["explain", *argv, "--no-env"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


# -- the generated orders


def test_each_window_of_releases_that_agree_is_one_entry_naming_vllm_and_its_window() -> None:
    orders = dense_orders(RECORDS)["order"]
    for o in orders:
        assert o["when"]["deploy.engine"] == "vllm", o["id"]
    block = [o for o in orders if o["id"].startswith("vllm-order-dense-fp8-block")]
    # 0.25.0 to 0.27.1 list one order: one window; the fallback (no release window) comes last
    assert [o["when"].get("vllm.version") for o in block] == [
        ">=0.24,<0.25",
        ">=0.25,<0.28",
        ">=0.28,<0.29",
        ">=0.29,<0.35",
        None,
    ]
    assert block[-1]["id"] == "vllm-order-dense-fp8-block"
    assert block[-1]["backends"] == block[-2]["backends"]
    # NVFP4 and MXFP4 come from the data too; 0.32 adds only a class of an id 0.30 lists (b12x): one window
    table = [o for o in orders if o["when"]["quant.scheme"] == "nvfp4" and "quant.input_transform" not in o["when"]]
    nvfp4 = [o["when"].get("vllm.version") for o in table]
    assert nvfp4 == [">=0.24,<0.25", ">=0.25,<0.28", ">=0.28,<0.30", ">=0.30,<0.35", None]
    # 0.34 takes Humming's fused-Hadamard NVFP4 GEMM ahead of the table for a Hadamard checkpoint: its
    # window comes before the table's, its not-stated entry after every stated window
    ids = [o["id"] for o in orders if o["when"]["quant.scheme"] == "nvfp4"]
    assert ids.index("vllm-order-dense-nvfp4-hadamard-0.34") < ids.index("vllm-order-dense-nvfp4-0.24")
    assert ids.index("vllm-order-dense-nvfp4-0.30-0.34") < ids.index("vllm-order-dense-nvfp4-hadamard")
    assert ids.index("vllm-order-dense-nvfp4-hadamard") < ids.index("vllm-order-dense-nvfp4")
    ahead = next(o for o in orders if o["id"] == "vllm-order-dense-nvfp4-hadamard-0.34")
    assert ahead["backends"] == ["humming_hadamard", *table[-2]["backends"]]
    assert any(o["when"]["quant.scheme"] == "mxfp4" for o in orders)


def test_nvfp4_dense_follows_vllms_own_table_not_the_hand_written_copy(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM lists FlashInfer's CuTe-DSL NVFP4 GEMM first on sm10x; the hand-written copy had TRT-LLM first
    out = _explain(capsys, "--gpu", "B200", "--model-type", "deepseek_v3", "--quant", "nvfp4")
    assert "dense   flashinfer_cutedsl" in out


def test_a_window_reads_the_release_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM 0.25 lists its FP8 Marlin kernel first for per-tensor FP8, and that kernel refuses an
    # FP8 GPU before 0.29: FlashInfer's per-tensor GEMM runs, as vLLM 0.25 runs it
    argv = ["--gpu", "RTX PRO 6000", "--model-type", "nemotron_h", "--quant", "fp8_tensor"]
    argv += ["--fact", "model.is_moe=false", "--explain=full"]
    out = _explain(capsys, *argv, "--engine", "vllm==0.25.0")
    assert "dense   flashinfer_cutlass" in out
    assert "vllm-marlin-fp8-linear-needs-no-fp8-mma-before-0.29" in out
    out = _explain(capsys, *argv, "--engine", "vllm==0.34.0")
    assert "dense   flashinfer_cutlass" in out
    assert "vllm-marlin-fp8-linear-needs-no-fp8-mma-before-0.29" not in out


# -- the loader's check


def _shipped_copy(tmp_path: Path) -> list[SourceFile]:
    root = tmp_path / "rules"
    shutil.copytree(shipped_rules_dir(), root)
    return [SourceFile(p, f"rules/{p.relative_to(root).as_posix()}", "shipped") for p in sorted(root.rglob("*.yaml"))]


_PREFER = """rules:
  - id: triton-first-at-tp4
    when: {quant.moe_scheme: fp8_block, deploy.tp: 4}
    paths: [moe]
    prefer: [triton]
    because: read from one engine's thread
    refs: [vllm#1]
"""


def test_a_shipped_prefer_without_an_engine_is_refused_in_one_line(tmp_path: Path) -> None:
    files = _shipped_copy(tmp_path)
    extra = tmp_path / "rules" / "known" / "zz-extra.yaml"
    extra.write_text(_PREFER, encoding="utf-8")
    with pytest.raises(PolicyError) as exc:
        load_files([*files, SourceFile(extra, "rules/known/zz-extra.yaml", "shipped")])
    first = str(exc.value).splitlines()[0]
    assert first.startswith("rules/known/zz-extra.yaml:3:"), first
    assert "a `prefer` rule without an engine" in first and "(rule `triton-first-at-tp4`)" in first


def test_a_shipped_order_without_an_engine_is_refused(tmp_path: Path) -> None:
    files = _shipped_copy(tmp_path)
    moe = tmp_path / "rules" / "backends" / "moe.yaml"
    text = moe.read_text(encoding="utf-8")
    moe.write_text(
        text.replace("when: {deploy.engine: vllm, quant.moe_scheme: none}", "when: {quant.moe_scheme: none}")
    )
    with pytest.raises(
        PolicyError, match=r"rules/backends/moe\.yaml:\d+:\d+: error: an `order` entry without an engine"
    ):
        load_files(files)


def test_an_operators_prefer_may_leave_the_engine_out(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(_PREFER, encoding="utf-8")
    policy = kp.load_policy([mine], environ=False, default_policy=False)
    assert "triton-first-at-tp4" in policy.by_id


def test_an_engine_test_on_every_branch_names_the_engine(tmp_path: Path) -> None:
    files = _shipped_copy(tmp_path)
    extra = tmp_path / "rules" / "known" / "zz-extra.yaml"
    extra.write_text(
        _PREFER.replace(
            "when: {quant.moe_scheme: fp8_block, deploy.tp: 4}",
            "when: {any: [{deploy.engine: vllm, deploy.tp: 4}, {deploy.engine: sglang, deploy.tp: 8}]}",
        ),
        encoding="utf-8",
    )
    load_files([*files, SourceFile(extra, "rules/known/zz-extra.yaml", "shipped")])
    extra.write_text(
        _PREFER.replace(
            "when: {quant.moe_scheme: fp8_block, deploy.tp: 4}",
            "when: {any: [{deploy.engine: vllm, deploy.tp: 4}, {deploy.tp: 8}]}",
        ),
        encoding="utf-8",
    )
    with pytest.raises(PolicyError, match="without an engine"):
        load_files([*files, SourceFile(extra, "rules/known/zz-extra.yaml", "shipped")])
