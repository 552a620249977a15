"""The SGLang audit's verdicts and documents, on SGLang choices written here (no SGLang needed;
tests/sglang/test_conformance.py runs the real sweep)."""

from __future__ import annotations

from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy._venvs import build_commands, venv_python
from kernelpolicy.engines.conformance import deployment_facts
from kernelpolicy.engines.sglang.conformance import (
    _flag_deployment,
    judge,
    judge_path,
    render_markdown,
    section_of,
    update_document,
)
from kernelpolicy.engines.sglang.testing import Deployment, SglangChoices
from kernelpolicy.errors import UsageError
from kernelpolicy.releases.sglang.flags import moe_ids_of
from kernelpolicy.render.flags import engine_flags

TARGET = {"sglang.version": "0.5.23", "deep_gemm.source": "none"}


@pytest.fixture(scope="module")
def decision_sm120(policy: kp.Policy) -> kp.Decision:
    """DeepSeek-V3 on an RTX PRO 6000 with no DeepGEMM installed: dense CUTLASS."""
    return kp.resolve(deployment_facts(policy, "deepseek-ai/DeepSeek-V3", "sm120", TARGET, engine="sglang"), policy)


def _ids(policy: kp.Policy) -> dict[str, frozenset[str]]:
    return moe_ids_of(policy.engines["sglang"])


def test_a_dense_function_of_the_decided_backend_is_same(policy: kp.Policy, decision_sm120: kp.Decision) -> None:
    assert decision_sm120.paths["dense"].backend == "cutlass"
    run = SglangChoices(dense_method="Fp8LinearMethod", dense_function="cutlass_w8a8_block_fp8_linear_with_fallback")
    assert judge_path(run, decision_sm120, "dense", _ids(policy)) == ("same", "")


def test_a_rejected_backend_is_a_conflict_naming_the_rule(policy: kp.Policy, decision_sm120: kp.Decision) -> None:
    run = SglangChoices(dense_method="Fp8LinearMethod", dense_function="deepgemm_w8a8_block_fp8_linear_with_fallback")
    result, reason = judge_path(run, decision_sm120, "dense", _ids(policy))
    assert result == "conflict"
    assert "deepgemm_w8a8_block_fp8_linear_with_fallback" in reason
    assert "rejects `deep_gemm`" in reason


def test_a_kernel_chosen_per_call_differs_and_says_so(policy: kp.Policy, decision_sm120: kp.Decision) -> None:
    run = SglangChoices(dense_method="ModelOptFp4LinearMethod")
    result, reason = judge_path(run, decision_sm120, "dense", _ids(policy))
    assert result == "differs"
    assert "picks its kernel per call" in reason


def test_a_named_per_call_linear_is_judged_by_its_kernel(policy: kp.Policy, decision_sm120: kp.Decision) -> None:
    """What ``apply_fp8_linear`` calls, named by ``_linears.py``, counts as the backend it is."""
    run = SglangChoices(dense_method="CompressedTensorsLinearMethod", dense_function="fp8_scaled_mm")
    assert judge_path(run, decision_sm120, "dense", _ids(policy)) == ("same", "")
    run = SglangChoices(dense_method="Fp8LinearMethod", dense_function="triton_scaled_mm")
    assert judge_path(run, decision_sm120, "dense", _ids(policy))[0] in ("differs", "conflict")
    mix = SglangChoices(dense_method="Fp8LinearMethod", dense_function="fp8_scaled_mm+tuned_triton_scaled_mm")
    result, reason = judge_path(mix, decision_sm120, "dense", _ids(policy))
    assert result == "differs"
    assert "`fp8_scaled_mm+tuned_triton_scaled_mm`, which no kernelpolicy backend is" in reason


def test_the_moe_runner_is_read_through_the_vocabulary(policy: kp.Policy, decision_sm120: kp.Decision) -> None:
    moe = decision_sm120.paths["moe"].backend
    assert moe is not None
    flag = policy.engines["sglang"].moe_flag[moe]
    assert judge_path(SglangChoices(moe_runner=flag), decision_sm120, "moe", _ids(policy)) == ("same", "")
    other = next(n for n, ids in _ids(policy).items() if moe not in ids and ids & {"triton", "deep_gemm"})
    assert judge_path(SglangChoices(moe_runner=other), decision_sm120, "moe", _ids(policy))[0] in (
        "conflict",
        "differs",
    )


def test_a_failed_step_is_could_not_run_and_parity_comes_from_the_plugin(
    policy: kp.Policy, decision_sm120: kp.Decision
) -> None:
    good = SglangChoices(
        dense_function="cutlass_w8a8_block_fp8_linear_with_fallback",
        moe_runner=policy.engines["sglang"].moe_flag[str(decision_sm120.paths["moe"].backend)],
        args={"attention_backend": "triton"},  # MLA off Hopper and SM100: Triton, SGLang's own default
        plugin={"fingerprint": decision_sm120.fingerprint},
    )
    assert judge(good, good, decision_sm120, _ids(policy)) == ("same", "", True)
    broken = SglangChoices(errors={"resolution": "ValueError: no such model type"})
    result, reason, parity = judge(good, broken, decision_sm120, _ids(policy))
    assert (result, parity) == ("could not run", None)
    assert reason.startswith("with the flags: step `resolution`: ValueError")
    other = SglangChoices(**{**good.to_dict(), "plugin": {"fingerprint": "0" * 16}})  # type: ignore[arg-type]
    result, reason, parity = judge(other, good, decision_sm120, _ids(policy))
    assert (result, parity) == ("differs", False)


def test_the_router_tier_is_judged_where_the_gate_shows_it(policy: kp.Policy, decision_sm120: kp.Decision) -> None:
    assert decision_sm120.paths["router"].backend == "tiny_gemm"  # 0.5.23, hidden 7168, sm >= 90
    assert judge_path(SglangChoices(router="tiny_gemm"), decision_sm120, "router", _ids(policy)) == ("same", "")
    assert judge_path(SglangChoices(), decision_sm120, "router", _ids(policy)) == ("same", "")  # not seen
    result, reason = judge_path(SglangChoices(router="cublas"), decision_sm120, "router", _ids(policy))
    assert result == "differs" and "runs `cublas`, the decision ranks `tiny_gemm` first" in reason


def test_a_refusal_the_decision_foresaw_is_unsupported_not_could_not_run(policy: kp.Policy) -> None:
    model = "nvidia/DeepSeek-R1-FP4"  # NVFP4 experts: SGLang before 0.5.13 refuses them off Blackwell
    old = {**TARGET, "sglang.version": "0.5.12.post1"}
    decision = kp.resolve(deployment_facts(policy, model, "sm90", old, engine="sglang"), policy)
    assert decision.paths["moe"].backend is None
    refused = SglangChoices(errors={"moe": "ValueError: Current platform does not support NVFP4 quantization."})
    result, reason, parity = judge(refused, refused, decision, _ids(policy))
    assert (result, parity) == ("unsupported", None)
    assert "no `moe` backend (`sglang-nvfp4-moe-needs-blackwell-before-0.5.13`)" in reason and "NVFP4" in reason
    runs = kp.resolve(deployment_facts(policy, model, "sm90", TARGET, engine="sglang"), policy)  # 0.5.23: Marlin
    assert judge(refused, refused, runs, _ids(policy))[0] == "could not run"  # the decision had a backend


# -- attention (issue #39): the backends SGLang's resolution set, judged by kernelpolicy id


def test_the_attention_backend_sglang_resolved_is_judged_by_its_id(policy: kp.Policy) -> None:
    """DeepSeek-V3 on B200, SGLang 0.5.23: its DeepSeek override sets TRT-LLM MLA (generated from
    the wheel), so SGLang's own `trtllm_mla` is the decision; FA3 on both phases is not."""
    decision = kp.resolve(deployment_facts(policy, "deepseek-ai/DeepSeek-V3", "sm100", TARGET, engine="sglang"), policy)
    assert decision.paths["attention"].backend == "trtllm_mla"
    run = SglangChoices(args={"attention_backend": "trtllm_mla", "prefill_attention_backend": "None"})
    assert run.attention == ("trtllm_mla", "trtllm_mla")
    assert judge_path(run, decision, "attention", _ids(policy)) == ("same", "")
    other = SglangChoices(args={"attention_backend": "flashinfer"})
    result, reason = judge_path(other, decision, "attention", _ids(policy))
    assert result in ("differs", "conflict") and "runs `flashinfer`" in reason


def test_an_attention_backend_with_no_id_or_split_phases_differs(policy: kp.Policy) -> None:
    decision = kp.resolve(deployment_facts(policy, "deepseek-ai/DeepSeek-V3", "sm100", TARGET, engine="sglang"), policy)
    phases = {"prefill_attention_backend": "trtllm_mla", "decode_attention_backend": "cutedsl_mla"}
    split = SglangChoices(args={"attention_backend": "None", **phases})
    result, reason = judge_path(split, decision, "attention", _ids(policy))
    assert result == "differs" and "`trtllm_mla+cutedsl_mla`, which no kernelpolicy attention backend is" in reason
    unset = SglangChoices(args={"attention_backend": "None"})
    result, reason = judge_path(unset, decision, "attention", _ids(policy))
    assert result == "differs" and "resolved no attention backend" in reason


def test_the_printed_attention_flag_becomes_the_server_arg(policy: kp.Policy) -> None:
    decision = kp.resolve(deployment_facts(policy, "deepseek-ai/DeepSeek-V3", "sm90", TARGET, engine="sglang"), policy)
    flags = engine_flags(decision.paths, policy.engines["sglang"], "0.5.23", decision.facts)
    flagged = _flag_deployment(Deployment(config={}, gpu=(9, 0), gpu_name="x"), flags)
    assert flagged.args["attention_backend"] == "fa3"  # FlashAttention's MLA kernel on Hopper


def test_the_printed_flags_become_server_args_and_environment(policy: kp.Policy, decision_sm120: kp.Decision) -> None:
    flags = engine_flags(decision_sm120.paths, policy.engines["sglang"], "0.5.23")
    base = Deployment(config={}, gpu=(12, 0), gpu_name="x", plugin=True, env={"A": "1"})
    flagged = _flag_deployment(base, flags)
    assert flagged.plugin is False
    assert flagged.args["fp8_gemm_runner_backend"] == "cutlass"
    assert flagged.env == {"A": "1", **flags["env"]}


def test_the_document_keeps_one_section_per_release(policy: kp.Policy, tmp_path: Path) -> None:
    doc = tmp_path / "sglang-conformance.md"
    update_document(doc, "0.5.23", "## SGLang 0.5.23\n\nnew\n")
    update_document(doc, "0.5.12.post1", "## SGLang 0.5.12.post1\n\nold\n")
    text = doc.read_text()
    assert text.index("0.5.12.post1 -->") < text.index("0.5.23 -->")
    assert section_of(text, "0.5.23") == "## SGLang 0.5.23\n\nnew\n"
    assert section_of(text, "0.6.0") is None
    assert render_markdown("0.5.23", [], _ids(policy)).startswith("## SGLang 0.5.23\n\n0 cells")


def test_an_sglang_venv_installs_that_release_and_checks_it(tmp_path: Path) -> None:
    commands = build_commands("0.5.23", tmp_path / "v", uv=None, base_python="python3", engine="sglang")
    assert any("sglang==0.5.23" in c for c in commands[1])
    assert commands[-1][-2:] == ["sglang", "0.5.23"]
    assert venv_python("0.5.23", "sglang").parts[-3] == "sglang-0.5.23"
    old = build_commands("0.5.12.post1", tmp_path / "v", uv=None, base_python="python3", engine="sglang")
    assert "kernels>=0.14.1,<0.15" in old[1]  # its transformers does not import with kernels 0.15+
    with pytest.raises(UsageError, match="not an engine"):
        venv_python("0.5.23", "tgi")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--sglang", "9.9.9"], "no cached venv of SGLang `9.9.9`"),
        (["--python", "/nonexistent/python"], "--python `/nonexistent/python`: no such file"),
        (["--python", "SELF", "--gpu", "sm75"], "--gpu `sm75`: one of"),
        (["--python", "SELF", "--model", "org/no-such-model"], "org/no-such-model"),
        (["--python", "SELF", "--gpu", "sm90"], "sglang is not installed for"),
        ([], "needs --sglang X.Y.Z or --python"),
    ],
)
def test_the_audit_refuses_bad_input_in_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from kernelpolicy.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = [sys.executable if a == "SELF" else a for a in argv]
    assert main(["sglang", "audit", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[0] and err[0].startswith("kernelpolicy: error:")
    assert not any("Traceback" in line for line in err)
