"""The conformance sweep's pieces that need no vLLM: cells, verdicts, the document."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import main
from kernelpolicy.engines.conformance import FAMILIES
from kernelpolicy.engines.conformance import one_line as _one_line
from kernelpolicy.engines.vllm.conformance import (
    OPTIONS,
    judge,
    matrix_cells,
    section_of,
    update_document,
)
from kernelpolicy.engines.vllm.testing import _from_result

QWEN = "Qwen/Qwen3.6-35B-A3B-FP8"


@pytest.fixture(scope="module")
def policy() -> kp.Policy:
    return kp.load_policy()


def _decision(policy: kp.Policy, **env: str) -> Any:
    facts = kp.facts_for(gpu="sm121", model=QWEN, env=env, facts={"vllm.version": "0.33.0"}, policy=policy)
    return kp.resolve(facts, policy)


def _choices(decision: Any, *, moe: str = "TRITON", plugin: dict[str, Any] | None = None) -> Any:
    """What the probe would report: the decision's dense kernel, *moe*, no warmup."""
    raw = {
        "dense": {"kernel": "CutlassFp8BlockScaledMMKernel", "scheme": "block"},
        "moe": {"backend": moe, "experts": "X", "scheme": "fp8"},
        "warmup": {"gate": False, "dense": False, "moe": False},
        "router": {"backend": decision.paths["router"].backend, "flags": {}},
        "plugin": plugin,
        "errors": {},
    }
    return _from_result(raw, gpu_cc=(12, 1), env={}, moe_backend=None, output="", returncode=0, elapsed=0.0)


def _plugin(decision: Any, **extra: Any) -> dict[str, Any]:
    entry = {"fingerprint": decision.fingerprint, "facts": dict(decision.facts.values), "summary": ""}
    return {"registered": True, "decisions": [entry], "warnings": [], "fallbacks": [], **extra}


def test_cells_cover_every_catalog_model_on_every_family_and_the_options(policy: kp.Policy) -> None:
    cells = matrix_cells(policy)
    assert {(c.model, c.family) for c in cells if c.option == "default"} == {
        (m.id, f) for m in policy.models for f in FAMILIES
    }
    assert {c.option for c in cells} == {"default"} | {
        " ".join(f"{k}={v}" for k, v in env.items()) for _, env in OPTIONS
    }
    assert [c.family for c in matrix_cells(policy, [QWEN], ["sm90"])] == ["sm90"] * (
        1 + sum(m == QWEN for m, _ in OPTIONS)
    )


def test_judge_same_when_every_path_follows_and_the_fingerprints_agree(policy: kp.Policy) -> None:
    decision = _decision(policy)
    assert decision.paths["moe"].backend == "triton"
    assert judge(_choices(decision, plugin=_plugin(decision)), decision) == ("same", "", True)


def test_judge_conflict_refused_and_parity(policy: kp.Policy) -> None:
    decision = _decision(policy)
    result, reason, parity = judge(_choices(decision, moe="DEEPGEMM", plugin=_plugin(decision)), decision)
    assert result == "conflict" and "deep_gemm-e8m0-qwen3_5" in reason and parity is True
    fallback = {"path": "moe", "decided": "triton", "used": "marlin", "where": "FP8 MoE oracle", "reason": "refused"}
    refused = judge(_choices(decision, moe="MARLIN", plugin=_plugin(decision, fallbacks=[fallback])), decision)
    assert refused[0] == "refused" and "`marlin`" in refused[1]
    other = _decision(policy, VLLM_USE_DEEP_GEMM="0")
    mismatch = judge(_choices(decision, plugin=_plugin(other)), decision)
    assert mismatch[0] == "differs" and mismatch[2] is False
    assert "`deploy.env.VLLM_USE_DEEP_GEMM` '0' vs None" in mismatch[1]
    broke = _from_result(
        {"errors": {"probe": 'ValueError: no kernel\n  x\n  File "/v/site-packages/vllm/a.py", line 3, in f'}},
        gpu_cc=(12, 1),
        env={},
        moe_backend=None,
        output="",
        returncode=0,
        elapsed=0.0,
    )
    assert judge(broke, decision) == ("could not run", 'ValueError: no kernel x (File "vllm/a.py", line 3, in f)', None)


def test_one_line_keeps_the_whole_message_and_no_local_paths() -> None:
    text = (
        "ValidationError: 1 validation error for ModelConfig\n  Value error, bad /tmp/kp-model-ab12/config.json\n"
        '  File "/home/u/.cache/venvs/vllm/lib/python3.11/site-packages/vllm/config.py", line 9, in f\n    x = 1'
    )
    assert _one_line(text) == (
        "ValidationError: 1 validation error for ModelConfig Value error, bad MODEL/config.json "
        '(File "vllm/config.py", line 9, in f)'
    )


def test_document_sections_are_per_release_and_kept(tmp_path: Path) -> None:
    doc = tmp_path / "c.md"
    update_document(doc, "0.33.0", "## vLLM 0.33.0\n\nnew\n")
    update_document(doc, "0.26.0", "## vLLM 0.26.0\n\nold\n")
    update_document(doc, "0.33.0", "## vLLM 0.33.0\n\nnewer\n")
    text = doc.read_text(encoding="utf-8")
    assert section_of(text, "0.33.0") == "## vLLM 0.33.0\n\nnewer\n"
    assert section_of(text, "0.26.0") == "## vLLM 0.26.0\n\nold\n"
    assert text.index("vllm 0.26.0") < text.index("vllm 0.33.0")
    assert section_of(text, "0.29.0") is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--matrix", "--gpu", "sm75"], "--gpu `sm75` with --matrix: one of `sm90`"),
        (["--matrix", "--plugin"], "--matrix sweeps its own options"),
        (["--markdown", "x.md", "--gpu", "sm121", "--model", QWEN], "--markdown goes with --matrix"),
        (["--model", QWEN], "needs --gpu SPEC"),
    ],
)
def test_matrix_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["vllm", "audit", "--python", sys.executable, *argv])
    _, err = capsys.readouterr()
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1


def test_judge_an_operators_backend_the_decision_refused_is_a_conflict(policy: kp.Policy) -> None:
    """The plugin leaves an operator's ``--attention-backend`` in place where a rule refused it
    (its status records the conflict): the cell is a `conflict` naming both backends and the rule."""
    decision = _decision(policy)
    record = {"path": "attention", "operator": "FLASHINFER", "decided": "triton_attn", "rule": "r-1"}
    result, reason, parity = judge(_choices(decision, plugin=_plugin(decision, conflicts=[record])), decision)
    assert result == "conflict" and parity is True
    assert reason == "attention: the operator's `FLASHINFER` runs, the decision chose `triton_attn` (rule `r-1`)"
