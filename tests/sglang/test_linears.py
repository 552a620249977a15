"""The kernel an SGLang linear layer calls per call, and the decision for SGLang naming it.

Found with the 0.5.23 conformance sweep: 68 of 200 cells `differs` because per-tensor and
per-channel FP8, FP4 and weight-only linears showed only their quant method ("picks its kernel
per call; the plugin cannot name or steer it"), and the SGLang decision ranked vLLM's per-tensor
FP8 order (FlashInfer first) where SGLang's own code runs CUTLASS or ``torch._scaled_mm``.
The naming runs here against fake objects shaped like 0.5.23's quant methods (class names and the
attributes SGLang sets in their ``__init__``); the real wheel runs it in the sweep
(``test_conformance.py``) and below, marked ``sglang``.
"""

from __future__ import annotations

import functools
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.cli import main
from kernelpolicy.releases.sglang import _linears
from kernelpolicy.releases.sglang.names import DENSE_FUNCTIONS, dense_ids_of_name, linear_run_by

FP8_UTILS = "sglang.srt.layers.quantization.fp8_utils"
FP4_UTILS = "sglang.srt.layers.quantization.fp4_utils"


@pytest.fixture
def sglang_gpu(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``torch.cuda`` answering one compute capability, and SGLang's fp8/fp4 utility modules."""
    state: dict[str, Any] = {"cc": (9, 0), "triton": False, "fp4": "flashinfer_trtllm"}
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(get_device_capability=lambda device=None: state["cc"])  # type: ignore[attr-defined]
    fp8_utils = types.ModuleType(FP8_UTILS)
    fp8_utils.cutlass_fp8_supported = lambda: True  # type: ignore[attr-defined]
    fp8_utils.flashinfer_bmm_fp8 = object()  # type: ignore[attr-defined]
    fp4_utils = types.ModuleType(FP4_UTILS)
    fp4_utils.get_fp4_gemm_runner_backend = lambda: types.SimpleNamespace(value=state["fp4"])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, FP8_UTILS, fp8_utils)
    monkeypatch.setitem(sys.modules, FP4_UTILS, fp4_utils)
    monkeypatch.delenv("SGLANG_ENABLE_FP8_GEMM_CONFIG_TUNE", raising=False)
    return state


def _make(kind: str, **attrs: Any) -> Any:
    return type(kind, (), {})() if not attrs else _with(type(kind, (), {})(), attrs)


def _with(obj: Any, attrs: dict[str, Any]) -> Any:
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


def _layer(size: int = 4096, scheme: Any = None) -> Any:
    return types.SimpleNamespace(input_size_per_partition=size, output_size_per_partition=size, scheme=scheme)


def _ids(method: Any, layer: Any) -> frozenset[str]:
    name = linear_run_by(method, layer)
    assert name is not None
    return dense_ids_of_name(name)


def _fp8_method(**attrs: Any) -> Any:
    serialized = types.SimpleNamespace(is_checkpoint_fp8_serialized=True)
    base = {"use_marlin": False, "block_quant": False, "cutlass_fp8_supported": True, "quant_config": serialized}
    return _make("Fp8LinearMethod", **{**base, **attrs})


def test_fp8_per_tensor_linear_runs_cutlass_on_hopper_and_scaled_mm_on_sm12x(sglang_gpu: dict[str, Any]) -> None:
    method = _fp8_method()
    assert linear_run_by(method, _layer()) == "fp8_scaled_mm"
    assert _ids(method, _layer()) == {"cutlass"}
    sglang_gpu["cc"] = (12, 1)  # per-tensor scales kept: torch._scaled_mm
    assert _ids(method, _layer()) == {"torch"}


def test_use_triton_w8a8_fp8_kernel_and_odd_shapes_run_triton(sglang_gpu: dict[str, Any]) -> None:
    method = _fp8_method()
    assert _ids(method, _layer(4100)) == {"triton"}  # CUTLASS needs both sizes multiples of 16
    sys.modules[FP8_UTILS].use_triton_w8a8_fp8_kernel = True  # type: ignore[attr-defined]
    assert _ids(method, _layer()) == {"triton"}


def test_fp8_marlin_and_block_fp8_keep_their_names(sglang_gpu: dict[str, Any]) -> None:
    assert linear_run_by(_fp8_method(use_marlin=True), _layer()) == "apply_fp8_marlin_linear"

    def deepgemm_w8a8_block_fp8_linear_with_fallback() -> None: ...

    block = _make(
        "Fp8LinearMethod",
        use_marlin=False,
        block_quant=True,
        w8a8_block_fp8_linear=deepgemm_w8a8_block_fp8_linear_with_fallback,
    )
    assert _ids(block, _layer()) == {"deep_gemm"}


def test_compressed_tensors_schemes(sglang_gpu: dict[str, Any]) -> None:
    method = _make("CompressedTensorsLinearMethod")
    tensor = _make("CompressedTensorsW8A8Fp8", strategy="tensor", weight_block_size=None)
    channel = _make("CompressedTensorsW8A8Fp8", strategy="channel", weight_block_size=None)

    def triton_w8a8_block_fp8_linear() -> None: ...

    block = _make(
        "CompressedTensorsW8A8Fp8",
        strategy="block",
        weight_block_size=[128, 128],
        w8a8_block_fp8_linear=functools.partial(triton_w8a8_block_fp8_linear),
    )
    assert _ids(method, _layer(scheme=tensor)) == {"torch"}  # one scale per tensor: torch._scaled_mm
    assert _ids(method, _layer(scheme=channel)) == {"cutlass"}
    assert _ids(method, _layer(scheme=block)) == {"triton"}
    assert _ids(method, _layer(scheme=_make("CompressedTensorsWNA16"))) == {"marlin"}
    assert linear_run_by(method, _layer(scheme=_make("CompressedTensorsW4A4Fp4"))) is None  # not modelled


def test_modelopt_fp8_runs_flashinfer_bmm(sglang_gpu: dict[str, Any]) -> None:
    serialized = types.SimpleNamespace(is_checkpoint_fp8_serialized=True)
    method = _make(
        "ModelOptFp8LinearMethod",
        use_marlin=False,
        enable_flashinfer_bmm=True,
        cutlass_fp8_supported=True,
        use_sm120_fp8=False,
        quant_config=serialized,
    )
    assert linear_run_by(method, _layer()) == "flashinfer_bmm_fp8"
    assert _ids(method, _layer()) == {"flashinfer_cutlass"}
    method.use_sm120_fp8 = True
    assert linear_run_by(method, _layer()) == "flashinfer_bmm_fp8+sm120_fp8_gemv"
    method.enable_flashinfer_bmm = False  # no FlashInfer: apply_fp8_linear's per-channel CUTLASS
    assert _ids(method, _layer()) == {"cutlass"}


def test_fp4_and_weight_only_linears_follow_the_published_runner(sglang_gpu: dict[str, Any]) -> None:
    fp4 = _make("ModelOptFp4LinearMethod")
    assert _ids(fp4, _layer()) == {"flashinfer_trtllm"}
    sglang_gpu["fp4"] = "marlin"
    assert _ids(fp4, _layer()) == {"marlin"}
    assert _ids(_make("GPTQMarlinLinearMethod"), _layer()) == {"marlin"}
    awq = _layer(scheme=_make("AWQMarlinLinearScheme", kernel=_make("AWQMarlinLinearKernel")))
    assert _ids(_make("AWQLinearMethod"), awq) == {"marlin"}


def test_every_name_the_naming_returns_has_an_entry() -> None:
    names = [v for k, v in vars(_linears).items() if k.isupper() and isinstance(v, str) and not k.startswith("_")]
    assert set(names) <= set(DENSE_FUNCTIONS), sorted(set(names) - set(DENSE_FUNCTIONS))


def test_the_linears_module_loads_standalone(tmp_path: Path) -> None:
    """The simulated-GPU probe loads ``_linears.py`` by path beside itself, without kernelpolicy."""
    import subprocess

    copy = tmp_path / "kp_linears.py"
    copy.write_text(Path(_linears.__file__).read_text(encoding="utf-8"), encoding="utf-8")
    script = tmp_path / "kp_probe.py"
    script.write_text("import sys\nimport kp_linears\nprint('kernelpolicy' in sys.modules)\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-E", "-s", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


def _dense(capsys: pytest.CaptureFixture[str], model: str, gpu: str, engine: str) -> str:
    code = main(["explain", "--gpu", gpu, "--model", model, "--engine", engine, "--no-env", "--json"])
    assert code == 0
    return str(json.loads(capsys.readouterr().out)["paths"]["dense"]["backend"])


@pytest.mark.parametrize(
    ("model", "gpu", "backend"),
    [
        ("neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8", "sm90", "cutlass"),  # fp8, per-tensor
        ("neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8", "sm100", "cutlass"),
        ("neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8", "sm120", "torch"),
        ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", "sm100", "torch"),  # compressed-tensors, per-tensor
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "sm121", "cutlass"),  # compressed-tensors, per-channel
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "sm100", "flashinfer_cutlass"),  # ModelOpt: FlashInfer bmm_fp8
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "sm90", "flashinfer_cutlass"),  # on Hopper too (its cuBLAS backend)
    ],
)
def test_the_sglang_decision_orders_per_tensor_fp8_as_sglang_dispatches(
    capsys: pytest.CaptureFixture[str], model: str, gpu: str, backend: str
) -> None:
    assert _dense(capsys, model, gpu, "sglang==0.5.23") == backend


def test_the_sglang_order_holds_for_sglang_only(capsys: pytest.CaptureFixture[str]) -> None:
    model = "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"
    assert _dense(capsys, model, "sm100", "vllm==0.34.0") != "torch"
    assert _dense(capsys, model, "sm100", "sglang==0.5.12.post1") != "torch"  # a release not read
    assert _dense(capsys, "nvidia/Llama-3.1-8B-Instruct-FP8", "sm90", "vllm==0.34.0") == "cutlass"


def test_the_plugin_names_a_per_call_linear_that_is_not_the_decision(
    sglang_gpu: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A compressed-tensors per-channel layer with ``USE_TRITON_W8A8_FP8_KERNEL=1``: SGLang runs
    Triton where the decision is CUTLASS; the plugin's layer hook names the layer."""
    from kernelpolicy.engines.sglang import _facts, plugin
    from kernelpolicy.facts.gpu import facts_from_capability

    monkeypatch.setattr(plugin, "_STATE", plugin._State())
    monkeypatch.setattr(_facts, "gpu_facts", lambda: facts_from_capability(9, 0, "NVIDIA H100"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("KERNELPOLICY_STRICT", "KERNELPOLICY_FACTS", "USE_TRITON_W8A8_FP8_KERNEL", plugin.SET_ENV):
        monkeypatch.delenv(var, raising=False)
    args = types.SimpleNamespace(
        model_path="RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
        tp_size=1,
        ep_size=1,
        moe_runner_backend="auto",
        fp8_gemm_runner_backend="auto",
        fp4_gemm_runner_backend="auto",
    )
    decision = plugin._decide(args)
    assert decision.paths["dense"].backend == "cutlass"
    method = _make("CompressedTensorsLinearMethod")
    layer = _layer(scheme=_make("CompressedTensorsW8A8Fp8", strategy="channel", weight_block_size=None))
    plugin._layer_hook(method, object(), layer, "model.layers.0.mlp.down_proj")
    assert plugin.status()["fallbacks"] == []
    sys.modules[FP8_UTILS].use_triton_w8a8_fp8_kernel = True  # type: ignore[attr-defined]
    plugin._layer_hook(method, object(), layer, "model.layers.1.mlp.down_proj")
    assert plugin.status()["fallbacks"] == [
        {"layer": "model.layers.1.mlp.down_proj", "runs": "triton_scaled_mm", "decided": "cutlass"}
    ]


@pytest.mark.sglang
def test_sglang_runs_the_kernel_the_decision_names_for_per_call_linears() -> None:
    """The 0.5.23 wheel on simulated GPUs: alone, with the plugin and with the printed flags."""
    import kernelpolicy as kp
    from kernelpolicy.cli._sglang import _target_facts
    from kernelpolicy.engines.sglang.conformance import run_matrix

    from .conftest import venv_python

    policy = kp.load_policy()
    models = [
        "neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8",
        "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
        "Qwen/Qwen2.5-7B-Instruct-AWQ",
        "nvidia/Llama-3.3-70B-Instruct-FP4",
        "nvidia/Llama-3.1-8B-Instruct-FP8",
    ]
    python = venv_python("0.5.23")
    results = run_matrix(python, policy, models, ["sm90"], _target_facts(python))
    assert [(r.model, r.result, r.reason) for r in results] == [(m, "same", "") for m in models]
