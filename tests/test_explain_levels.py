"""`explain --explain=notes|full`: the default fits 80 columns and names what decided; `full`
is the whole trace (issue 25)."""

from __future__ import annotations

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import main
from kernelpolicy.render.explain import NOTES_WIDTH, render, render_notes

SEED = ["explain", "--no-env", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"]


def test_default_is_notes_and_fits_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SEED) == 0
    default = capsys.readouterr().out
    assert main([*SEED, "--explain=notes"]) == 0
    assert capsys.readouterr().out == default
    lines = default.splitlines()
    assert max(map(len, lines)) <= NOTES_WIDTH, [line for line in lines if len(line) > NOTES_WIDTH]
    assert "dense   cutlass" in lines and "moe     triton" in lines
    assert any("deep_gemm-e8m0-qwen3_5 (accuracy)" in line for line in lines)  # the rule that decided
    assert "catalog.dense.flashinfer_deep_gemm" not in default  # a requirement that did not decide
    assert len(lines) < 40


def test_full_is_the_whole_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SEED, "--explain=full"]) == 0
    full = capsys.readouterr().out
    assert "x flashinfer_deep_gemm  catalog.dense.flashinfer_deep_gemm" in full
    assert "rules/known/deep_gemm.yaml:" in full and "refs vllm#37804" in full


def test_explain_level_excludes_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SEED, "--explain=full", "--json"]) == 2
    assert "not allowed with" in capsys.readouterr().err


def _deployments(policy: kp.Policy) -> list[tuple[str, str, dict[str, str]]]:
    """Every catalog model on a GPU of each family, on vLLM and on SGLang 0.5.12.post1 (where a
    refusal leaves MoE layers without any backend)."""
    engines: tuple[dict[str, str], ...] = ({}, {"deploy.engine": "sglang", "sglang.version": "0.5.12.post1"})
    return [(g, m.id, e) for g in ("sm90", "sm100", "sm121", "sm89") for m in policy.models for e in engines]


def test_notes_of_every_catalog_model_fit(policy: kp.Policy) -> None:
    """No line of the notes is wider than 80 columns, and every rule that decided a path is named."""
    for gpu, model, engine in _deployments(policy):
        try:
            d = kp.resolve(kp.facts_for(gpu=gpu, model=model, facts=engine, policy=policy), policy)
        except kp.KernelPolicyError:
            continue
        text = render_notes(d, policy, model=model)
        wide = [line for line in text.splitlines() if len(line) > NOTES_WIDTH]
        assert wide == [], (gpu, model, engine, wide)
        for p in d.paths.values():
            for rule in p.rules:
                assert rule in text, (gpu, model, rule)
        assert len(text.splitlines()) < len(render(d, policy, model=model).splitlines()) + 4
