"""SGLang's own choices read from its wheels: where each release sets its MoE runner by itself
(``releases/sglang/overrides.json``, scanned with :mod:`ast`), its automatic block-FP8 linear
order, and the rules generated from them (``rules/backends/sglang.yaml``)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from kernelpolicy._paths import cache_root
from kernelpolicy.cli import main
from kernelpolicy.releases.sglang._overrides import OVERRIDES_FILE, scan_overrides
from kernelpolicy.releases.sglang._overrides import main as scan_main
from kernelpolicy.releases.sglang.generate import GENERATED, dense_order_ids, generated_files, translate

ROOT = Path(__file__).resolve().parents[2]
WHEELS = cache_root() / "wheels"
COMMITTED = json.loads(OVERRIDES_FILE.read_text(encoding="utf-8"))["releases"]


def test_the_generated_rule_file_is_in_sync_with_the_data() -> None:
    want = generated_files(ROOT)[ROOT / GENERATED]
    assert (ROOT / GENERATED).read_text(encoding="utf-8") == want, (
        f"{GENERATED} is out of date: run `python -m kernelpolicy._docs`"
    )


@pytest.mark.parametrize("version", sorted(COMMITTED))
def test_the_committed_overrides_are_the_wheels(version: str) -> None:
    wheels = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang {version} wheel under {WHEELS} (pip download sglang=={version} --no-deps -d {WHEELS})")
    scanned = scan_overrides(wheels[0])
    assert scanned.pop("version") == version
    assert scanned == COMMITTED[version]


def test_0_5_23_sets_about_35_runners_by_itself_and_the_routed_one_from_0_5_18() -> None:
    newest = COMMITTED["0.5.23"]["moe_runner"]
    files = {e["file"] for e in newest if e["file"].startswith("arg_groups/model_overrides/")}
    assert len(newest) >= 35 and len(files) >= 15
    minimax = [e for e in newest if "MiniMaxM2ForCausalLM" in e["architectures"]]
    assert [e["value"] for e in minimax] == ["flashinfer_trtllm_routed"]
    routed = [
        v
        for v, r in COMMITTED.items()
        if any(e["value"] == "flashinfer_trtllm_routed" and "minimax_m2" in e["function"] for e in r["moe_runner"])
    ]
    assert routed[0] == "0.5.18"


# -- the scanner on a release built here

_OVERRIDE = """
from x import _register_for, get_platform, model_config_of
_FAMILY = frozenset({"ArchA", "ArchB"})

@_register_for("MyMoeForCausalLM")
def _my_overrides(server_args, hf_config):
    cfg = resolving_view(server_args)
    overrides = {}
    if get_platform().is_sm100 and cfg.moe_runner_backend == "auto":
        overrides["moe_runner_backend"] = "flashinfer_trtllm"
    else:
        overrides["moe_runner_backend"] = "triton"
    return overrides

def _family(view):
    model_arch = hf_config.architectures[0]
    if model_arch not in _FAMILY:
        return {}
    return {"moe_runner_backend": "flashinfer_cutlass"}
"""
_DENSE = """
def _dispatch_auto_backend():
    if deep_gemm_wrapper.ENABLE_JIT_DEEPGEMM:
        return deepgemm_w8a8_block_fp8_linear_with_fallback
    elif _use_aiter:
        return aiter_w8a8_block_fp8_linear
    elif get_platform().is_sm120:
        return cutlass_w8a8_block_fp8_linear_with_fallback
    else:
        return triton_w8a8_block_fp8_linear
"""


def _wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "sglang-9.9.9-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("sglang-9.9.9.dist-info/METADATA", "Name: sglang\nVersion: 9.9.9\n")
        z.writestr("sglang/srt/arg_groups/model_overrides/my_moe.py", _OVERRIDE)
        z.writestr("sglang/srt/layers/quantization/fp8_utils.py", _DENSE)
    return wheel


def test_the_scan_reads_each_runner_with_the_tests_around_it(tmp_path: Path) -> None:
    got = scan_overrides(_wheel(tmp_path))
    mine = {(e["function"], e["value"]): e for e in got["moe_runner"]}
    sm100 = mine[("_my_overrides", "flashinfer_trtllm")]
    assert sm100["architectures"] == ["MyMoeForCausalLM"]
    assert sm100["tests"] == ["get_platform().is_sm100 and cfg.moe_runner_backend == 'auto'"]
    other = mine[("_my_overrides", "triton")]
    assert other["tests"] == ["not (get_platform().is_sm100 and cfg.moe_runner_backend == 'auto')"]
    # an early return is a guard: what follows holds past it, with the module's list it reads
    family = mine[("_family", "flashinfer_cutlass")]
    assert family["tests"] == ["not model_arch not in _FAMILY"]
    assert family["locals"]["_FAMILY"] == ["['ArchA', 'ArchB']"]
    assert [fn for fn, _ in got["dense_block_fp8_auto"]] == [
        "deepgemm_w8a8_block_fp8_linear_with_fallback",
        "aiter_w8a8_block_fp8_linear",
        "cutlass_w8a8_block_fp8_linear_with_fallback",
        "triton_w8a8_block_fp8_linear",
    ]
    # the AMD branch is left out of the order; the others become kernelpolicy ids
    assert dense_order_ids(got["dense_block_fp8_auto"]) == ["deep_gemm", "cutlass", "triton"]


def test_the_scan_command_writes_the_table_and_refuses_a_non_wheel_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "overrides.json"
    assert scan_main([str(_wheel(tmp_path)), "--out", str(out)]) == 0
    assert list(json.loads(out.read_text())["releases"]) == ["9.9.9"]
    bad = tmp_path / "not-a-wheel.whl"
    bad.write_text("no")
    assert scan_main([str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelpolicy: error: ") and err.count("\n") == 1


# -- what the tests mean in kernelpolicy's facts


def _entry(*tests: str, archs: tuple[str, ...] = ("A",), **local: list[str]) -> dict[str, object]:
    return {"tests": list(tests), "architectures": list(archs), "locals": local}


def test_sglang_tests_become_facts() -> None:
    e = _entry(
        "get_platform().is_sm100 and cfg.moe_runner_backend == 'auto'", "cfg.quantization in {'fp8', 'modelopt_fp4'}"
    )
    any_of = [{"quant.method": "fp8"}, {"quant.method": ["modelopt", "modelopt_fp4"], "quant.moe_scheme": "nvfp4"}]
    assert translate(e) == {"model.architecture": "A", "gpu.family": "sm100", "all": [{"any": any_of}]}
    # a platform other than NVIDIA's never holds; a test kernelpolicy cannot say stops the override
    assert translate(_entry("get_platform().is_hip")) is None
    assert translate(_entry("cfg.speculative_algorithm is None")) == "cfg.speculative_algorithm is None"
    # an explicit runner is the deployment's choice: the override never acts there
    assert translate(_entry("cfg.moe_runner_backend != 'auto'")) is None
    # a local name is read through what it was assigned
    assert translate(_entry("on_blackwell", on_blackwell=["is_sm100_supported()"])) == {
        "model.architecture": "A",
        "gpu.family": "sm100",
    }


# -- the decisions


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code = main(["explain", "--no-env", "--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_sglang_takes_its_own_orders_and_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    # H100: SGLang's block-FP8 auto order is DeepGEMM first, and its FP8 MoE method runs Triton
    d = _explain(capsys, "--gpu", "H100", "--engine", "sglang==0.5.23", "--model", "deepseek-ai/DeepSeek-V3")
    paths = d["paths"]
    assert isinstance(paths, dict)
    assert paths["dense"]["backend"] == "deep_gemm" and paths["moe"]["backend"] == "triton"
    # B200: SGLang resolves DeepSeek's MoE to FlashInfer's TRT-LLM runner by itself (a generated prefer)
    d = _explain(capsys, "--gpu", "B200", "--engine", "sglang==0.5.23", "--model", "deepseek-ai/DeepSeek-V3")
    moe = d["paths"]["moe"]  # type: ignore[index]
    assert moe["backend"] == "flashinfer_trtllm"
    assert any("deepseek_moe_quant_resolution" in r for r in moe["preferred_by"])
    # vLLM's own orders and prefers do not reach an SGLang decision
    d = _explain(
        capsys, "--gpu", "H100", "--engine", "sglang==0.5.23", "--model", "deepseek-ai/DeepSeek-V3", "-tp", "8"
    )
    assert not any(r.startswith(("vllm-", "deep_gemm-moe-tp8")) for r in d["paths"]["moe"].get("preferred_by", []))  # type: ignore[union-attr,index]


def test_the_routed_trtllm_runner_is_its_own_backend(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--gpu", "B200", "--model", "MiniMaxAI/MiniMax-M2", "--fact", "host.machine=x86_64"]
    argv += ["--fact", "quant.scheme=nvfp4", "--fact", "quant.moe_scheme=nvfp4", "--fact", "quant.method=modelopt"]
    d = _explain(capsys, *argv, "--engine", "sglang==0.5.23")
    moe = d["paths"]["moe"]  # type: ignore[index]
    assert moe["backend"] == "flashinfer_trtllm_routed"
    # the plain runner's MiniMax rule does not deny the routed one; SGLang's line names the runner
    assert not any(c["backend"] == "flashinfer_trtllm_routed" and c["verdict"] == "rejected" for c in moe["candidates"])
    args = d["engine"]["sglang"]["args"]  # type: ignore[index]
    assert args[args.index("--moe-runner-backend") + 1] == "flashinfer_trtllm_routed"
    # vLLM has no such runner
    d = _explain(capsys, *argv, "--engine", "vllm==0.34.0")
    assert d["paths"]["moe"]["backend"] != "flashinfer_trtllm_routed"  # type: ignore[index]
