"""Rules that hold on one engine only: they name it (`deploy.engine`), and the other never matches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.analysis.cases import run_case
from kernelpolicy.cli import main
from kernelpolicy.facts import facts_for

SM120_GROUPED = {
    "model.is_moe": True,
    "quant.scheme": "fp8_block",
    "quant.moe_scheme": "fp8_block",
    "quant.scale_fmt": "fp32",
    "deep_gemm.source": "external",
    "deep_gemm.has_sm120_sf_layout": True,
    # SGLang's FP8 MoE method runs DeepGEMM by itself only behind DeepEP (Triton first otherwise)
    "deploy.all2all": "deepep",
}
RULE = "sglang-sm120-grouped-deep_gemm-skips-ue8m0-requant"


def _moe_rejections(policy: kp.Policy, facts: dict[str, object]) -> list[str]:
    d = kp.resolve(facts_for(gpu="sm120", facts=facts, policy=policy), policy)
    return [r for c in d.paths["moe"].candidates for r in c.rules]


@pytest.mark.parametrize(
    ("engine", "fires"),
    [
        ({"deploy.engine": "sglang", "sglang.version": "0.5.22"}, True),
        ({"deploy.engine": "sglang", "sglang.version": "0.5.23"}, False),  # fixed: `until`
        ({"deploy.engine": "sglang", "sglang.version": "0.5.12.post1"}, False),  # before the guard
        ({"deploy.engine": "vllm", "sglang.version": "0.5.22"}, False),  # installed, but vLLM runs
        ({}, False),  # the pipeline's default engine is vLLM
    ],
)
def test_an_sglang_rule_holds_on_sglang_only(policy: kp.Policy, engine: dict[str, object], fires: bool) -> None:
    assert (RULE in _moe_rejections(policy, {**SM120_GROUPED, **engine})) is fires


def test_explain_takes_the_engine_from_engine_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["explain", "--gpu", "sm120", "--json", "--no-env", "--engine", "sglang==0.5.23"]
    args += [f"--fact={k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in SM120_GROUPED.items()]
    assert main(args) == 0
    facts = json.loads(capsys.readouterr().out)["facts"]
    assert facts["deploy.engine"] == "sglang" and facts["sglang.version"] == "0.5.23"


def test_a_case_names_its_engine_and_a_bad_one_is_its_error(tmp_path: Path) -> None:
    case = tmp_path / "c.yaml"
    facts = "\n".join(f"    {k}: {json.dumps(v)}" for k, v in SM120_GROUPED.items())
    case.write_text(
        f"given:\n  gpu: sm120\n  engine: sglang==0.5.22\n  facts:\n{facts}\nexpect:\n  rules: {{moe: [{RULE}]}}\n"
    )
    assert run_case(case).ok
    case.write_text(case.read_text().replace("sglang==0.5.22", "tensorrt-llm==1.0"))
    result = run_case(case)
    assert not result.ok and "is not of the form `vllm==X.Y.Z` or `sglang==X.Y.Z`" in " ".join(result.failures)


def test_the_keys_the_pipeline_defaults_are_always_known_to_the_check() -> None:
    # the check leaves out *unknown* for these: the pipeline never hands the resolver one unset
    from kernelpolicy.analysis.domain import ALWAYS_KNOWN
    from kernelpolicy.deployment.pipeline import _DEFAULTS

    assert {k for k, _ in _DEFAULTS} <= ALWAYS_KNOWN


def test_an_entry_that_refuses_rejects_every_backend_with_its_reason(policy: kp.Policy) -> None:
    """`refuse: true`: the entry decides, no rule has to deny the backends one by one."""
    facts = {"deploy.engine": "sglang", "sglang.version": "0.5.12.post1"}
    d = kp.resolve(facts_for(gpu="sm90", model="nvidia/DeepSeek-R1-FP4", facts=facts, policy=policy), policy)
    moe = d.paths["moe"]
    assert moe.backend is None and moe.rule == "sglang-nvfp4-moe-needs-blackwell-before-0.5.13"
    assert {c.backend for c in moe.candidates} == set(policy.backends["moe"])
    assert all(c.verdict == "rejected" and c.rules == (moe.rule,) for c in moe.candidates)
    assert moe.reason is not None and "Marlin fallback" in moe.reason
    assert d.paths["dense"].backend is not None  # the entry names the MoE path only
    from kernelpolicy.render.explain import render

    text = render(d, policy)
    assert "  x every backend: flashinfer_trtllm, " in text and text.count("0.5.13 added a Marlin fallback") == 1
    # an explicit choice does not get past an engine that refuses the deployment
    forced = facts_for(gpu="sm90", model="nvidia/DeepSeek-R1-FP4", facts=facts, moe_backend="marlin", policy=policy)
    assert kp.resolve(forced, policy).paths["moe"].backend is None


@pytest.mark.parametrize(
    ("gpu", "release", "none"),
    [("sm90", "0.5.12.post1", True), ("sm90", "0.5.13", False), ("sm100", "0.5.12.post1", False)],
)
def test_nvfp4_experts_on_sglang_before_0_5_13_need_blackwell(
    policy: kp.Policy, gpu: str, release: str, none: bool
) -> None:
    facts = {"deploy.engine": "sglang", "sglang.version": release}
    d = kp.resolve(facts_for(gpu=gpu, model="nvidia/Qwen3-235B-A22B-FP4", facts=facts, policy=policy), policy)
    assert (d.paths["moe"].backend is None) is none
    vllm = kp.resolve(facts_for(gpu=gpu, model="nvidia/Qwen3-235B-A22B-FP4", policy=policy), policy)
    assert vllm.paths["moe"].backend is not None  # vLLM's own kernels are another matter
