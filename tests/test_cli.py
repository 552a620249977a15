"""The command line: the contract of docs/design.md, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpolicy.cli import main

SEED = ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_seed_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *SEED, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["schema"] == "kernelpolicy.decision/1"
    assert d["fingerprint"].startswith("sha256:")
    assert d["paths"]["dense"]["backend"] == "cutlass"
    assert d["paths"]["moe"]["backend"] == "triton"
    assert not any(k.startswith("deep_gemm.") for k in d["paths"]["warmup"]["kernels"])
    rejected = next(c for c in d["paths"]["moe"]["candidates"] if c["backend"] == "deep_gemm")
    assert rejected["verdict"] == "rejected" and rejected["rules"][0] == "deep_gemm-e8m0-qwen3_5"
    assert d["facts"]["gpu.sm"] == "sm121" and d["sources"]["model.type"] == "catalog"
    assert d["engine"]["vllm"]["args"] == ["--moe-backend", "triton"]


def test_seed_human(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *SEED, "--explain=full")  # the whole trace (the default is the notes)
    assert code == 0
    assert "dense   cutlass   decided by deep_gemm-e8m0-qwen3_5" in out
    assert "vllm#37804" in out and "vllm#50332" in out
    assert "VLLM_USE_DEEP_GEMM=0 vllm serve Qwen/Qwen3.6-35B-A3B-FP8 --moe-backend triton" in out
    from kernelpolicy._install import install_command

    assert install_command("vllm") in out and "'kernelpolicy[vllm]'" not in out


def test_json_is_byte_identical(capsys: pytest.CaptureFixture[str]) -> None:
    _, a, _ = run(capsys, *SEED, "--json")
    _, b, _ = run(capsys, *SEED, "--json")
    assert a == b


def test_triton_too_old_on_sm121(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *SEED, "--fact", "triton.version=3.5.0")
    assert code == 0
    assert "triton-sm121a-ptxas (crash)" in out
    assert "moe     marlin" in out


def test_engine_release_sets_facts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "explain",
        "--gpu",
        "sm120",
        "--model",
        "RedHatAI/gemma-4-31B-it-FP8-block",
        "--engine",
        "vllm==0.24.0",
        "--json",
    )
    d = json.loads(out)
    assert code == 0 and d["paths"]["dense"]["backend"] == "cutlass"
    assert d["facts"]["deep_gemm.commit"] == "891d57b"  # commits are compared by their first 7 hex digits
    assert d["paths"]["moe"]["backend"] is None and d["paths"]["moe"]["reason"]


def test_model_type_and_quant(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "explain",
        "--gpu",
        "B200",
        "--model-type",
        "qwen3_5_text",
        "--quant",
        "fp8_block",
        "--fact",
        "model.is_moe=false",
        "--json",
    )
    assert code == 0
    assert json.loads(out)["paths"]["dense"]["backend"] == "cutlass"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["explain", "--gpu", "sm999", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"],
            "unknown GPU `sm999`",
        ),
        (
            ["explain", "--gpu", "sm121", "--model", "nobody/nothing"],
            "unknown model `nobody/nothing`",
        ),
        (
            [*SEED, "--fact", "gpu.smm=sm121"],
            "fact `gpu.smm`: unknown fact key (did you mean `gpu.sm`?)",
        ),
        ([*SEED, "--fact", "novalue"], "expected KEY=VALUE"),
        (
            [*SEED, "--moe-backend", "deep_gemm", "--env", "VLLM_USE_DEEP_GEMM=0"],
            "contradictory overrides",
        ),
        ([*SEED, "--engine", "tgi==1.0"], "not of the form `vllm==X.Y.Z`"),
        (["explain", "--gpu", "sm121"], "no model given"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_malformed_policy_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "rules:\n  - id: x\n    when: {gpu.famly: sm120}\n    deny: triton\n    severity: crash\n    because: y\n"
    )
    code, _, err = run(capsys, *SEED, "--policy", str(bad))
    assert code == 2
    assert err.strip() == f"kernelpolicy: {bad}:3:12: error: unknown fact key `gpu.famly` (rule `x`)"


def test_no_valid_backend_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pol = tmp_path / "p.yaml"
    pol.write_text(
        "rules:\n  - id: nothing\n    deny: [cutlass, marlin, triton, b12x, humming, torch, deep_gemm, "
        "flashinfer_deep_gemm, flashinfer_trtllm, flashinfer_cutlass, flashinfer_cutedsl, emulation]\n"
        "    paths: [dense]\n    severity: crash\n    because: test\n    refs: [t#1]\n"
    )
    code, out, err = run(capsys, *SEED, "--policy", str(pol))
    assert code == 3
    assert "dense   NO VALID BACKEND" in out and "no valid backend for path(s): dense" in err


def test_policy_from_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = tmp_path / "p.yaml"
    pol.write_text("rules:\n  - id: op-marlin\n    use: marlin\n    paths: [moe]\n    because: validated\n")
    monkeypatch.setenv("KERNELPOLICY_POLICY", str(pol))
    code, out, _ = run(capsys, *SEED, "--json")
    assert code == 0 and json.loads(out)["paths"]["moe"]["backend"] == "marlin"


def test_import_is_light() -> None:
    code = (
        "import sys, kernelpolicy as kp\n"
        "p = kp.load_policy(); kp.resolve(kp.facts_for(gpu='sm121', model='Qwen/Qwen3.6-35B-A3B-FP8', policy=p), p)\n"
        "heavy = {'torch', 'triton', 'vllm', 'deep_gemm', 'pynvml'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", *SEED, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["paths"]["moe"]["backend"] == "triton"


def test_gpu_auto_uses_machine_facts(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpolicy.facts import machine

    def fake() -> tuple[dict[str, object], dict[str, str]]:
        return (
            {
                "gpu.sm": "sm121",
                "gpu.family": "sm120",
                "gpu.cc": "12.1",
                "gpu.name": "NVIDIA GB10",
                "triton.version": "3.5.0",
            },
            {
                "gpu.sm": "nvml",
                "gpu.family": "nvml",
                "gpu.cc": "nvml",
                "gpu.name": "nvml",
                "triton.version": "metadata",
            },
        )

    monkeypatch.setattr(machine, "auto_gpu_facts", fake)
    code, out, _ = run(capsys, "explain", "--gpu", "auto", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--json")
    d = json.loads(out)
    assert code == 0
    assert d["sources"]["gpu.sm"] == "nvml" and d["sources"]["triton.version"] == "metadata"
    assert d["paths"]["moe"]["backend"] == "marlin"  # triton 3.5 cannot target sm_121a


def test_gpu_auto_without_gpu(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpolicy.facts import machine

    def none() -> tuple[dict[str, object], dict[str, str]]:
        raise ValueError("no NVIDIA GPU found: NVML library not found")

    monkeypatch.setattr(machine, "auto_gpu_facts", none)
    code, _, err = run(capsys, "explain", "--gpu", "auto", "--model", "Qwen/Qwen3.6-35B-A3B-FP8")
    assert code == 2
    assert "no NVIDIA GPU found" in err and "--gpu sm121" in err


def test_example_policy_loads_and_pins(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).parent.parent / "policy" / "examples" / "fleet.yaml"
    code, out, _ = run(
        capsys, "explain", "--gpu", "B200", "--model", "deepseek-ai/DeepSeek-V3", "--policy", str(example), "--json"
    )
    d = json.loads(out)
    assert code == 0
    assert d["paths"]["moe"]["backend"] == "deep_gemm"
    assert d["paths"]["moe"]["explicit"] == "fleet-deepseek-v3-deep_gemm"


# -- an explicit choice the decision refused (issue 25) --------------------------------------------

REFUSED = ["explain", "--no-env", "--gpu", "B200", "--model", "nvidia/DeepSeek-R1-FP4", "--linear-backend", "cutlass"]


def test_refused_explicit_choice_exits_5_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """`--linear-backend cutlass` cannot run NVFP4: the decision takes another backend and must
    not look as if the flag was honoured, in the text, the JSON or the exit status."""
    assert main(REFUSED) == 5
    notes = capsys.readouterr().out
    # vLLM's NVFP4 linear table lists FlashInfer's CuTe-DSL GEMM first on sm10x (rules/backends/dense.vllm.yaml)
    assert "dense   flashinfer_cutedsl   (`--linear-backend cutlass` REFUSED)" in notes.splitlines()
    assert main([*REFUSED, "--explain=full"]) == 5
    out, err = capsys.readouterr()
    dense = next(line for line in out.splitlines() if line.startswith("dense "))
    assert "explicit `--linear-backend cutlass` REFUSED (catalog.dense.cutlass)" in dense, dense
    assert "explicit: `--linear-backend cutlass`" not in out
    assert err == (
        "kernelpolicy: explicit choice refused, another backend decided:"
        " `--linear-backend cutlass` (dense: catalog.dense.cutlass)\n"
    )
    assert main([*REFUSED, "--json"]) == 5
    dense_json = json.loads(capsys.readouterr().out)["paths"]["dense"]
    assert dense_json["explicit_refused"] is True and dense_json["backend"] != "cutlass"


def test_honoured_explicit_choice_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "--no-env", "--json", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"]
    assert main([*argv, "--moe-backend", "triton"]) == 0
    moe = json.loads(capsys.readouterr().out)["paths"]["moe"]
    assert moe["explicit"] == "--moe-backend triton" and "explicit_refused" not in moe


@pytest.mark.parametrize(
    ("release", "gpu", "router"),
    [("0.34.0", "sm90", "bf16x3"), ("0.29.0", "sm90", "linear"), ("0.34.0", "sm100", "bf16x3")],
)
def test_explain_router_bf16x3_on_hopper_from_vllm_034(
    capsys: pytest.CaptureFixture[str], release: str, gpu: str, router: str
) -> None:
    """vLLM 0.34's GateLinear runs BF16x3 for an FP32 gate on Hopper too (an SM90 kernel); the
    catalog had it on family 100 only, so the decision ranked a BF16 tier vLLM cannot run."""
    argv = ["explain", "--gpu", gpu, "--model", "openai/gpt-oss-120b", "--engine", f"vllm=={release}"]
    code, out, _ = run(capsys, *argv, "--fact", "model.router_dtype=float32", "--json")
    assert code == 0
    path = json.loads(out)["paths"]["router"]
    assert path["backend"] == router
    if release == "0.29.0":
        (bf16x3,) = (c for c in path["candidates"] if c["backend"] == "bf16x3")
        assert bf16x3["rules"] == ["bf16x3-router-sm90-needs-vllm-0.34"]


@pytest.mark.parametrize("model", ["openai/gpt-oss-20b", "Qwen/Qwen3.5-397B-A17B-FP8"])
def test_explain_router_of_a_bf16_gate_assumes_nothing(capsys: pytest.CaptureFixture[str], model: str) -> None:
    """The catalog states these gates' BF16 weight (vLLM builds them in the model dtype): the
    router decision no longer rests on an assumed `model.router_dtype`."""
    code, out, _ = run(capsys, "explain", "--gpu", "sm120", "--model", model, "--engine", "vllm==0.34.0", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["paths"]["router"]["backend"] == "cublas"
    assert "model.router_dtype" not in json.dumps(d.get("assumptions", []))


@pytest.mark.parametrize(("gpu", "router"), [("sm90", "ll_bf16"), ("sm100", "ll_bf16"), ("sm120", "linear_fp32")])
def test_explain_nemotron_h_router_is_fp32_where_vllm_has_no_router_kernel(
    capsys: pytest.CaptureFixture[str], gpu: str, router: str
) -> None:
    """vLLM's Nemotron-H gate asks for FP32 compute: off Hopper and family 100 vLLM stores its
    weight in FP32 and runs a plain FP32 matmul, so the decision must not rank cuBLAS there."""
    argv = ["explain", "--gpu", gpu, "--model", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "--engine", "vllm==0.34.0"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    path = json.loads(out)["paths"]["router"]
    assert path["backend"] == router
    if gpu == "sm120":
        (cublas,) = (c for c in path["candidates"] if c["backend"] == "cublas")
        assert cublas["rules"] == ["nemotron_h-router-fp32-off-hopper-and-family100"]
