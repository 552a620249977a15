"""The plugin's hooks through SGLang's own hook code, read from the 0.5.23 wheel.

``sglang/srt/plugins/hook_registry.py`` and ``sglang/srt/arg_groups/resolution_hooks.py`` import
only the standard library, so they run here as they are in the wheel: the hooks the plugin
registers are applied by SGLang's ``HookRegistry.apply_hooks`` and called through its wrappers
and ``run_hook``, which checks the hook signatures the plugin assumes. Skipped without the wheel.
"""

from __future__ import annotations

import sys
import types
import zipfile
from typing import Any

import pytest

from kernelpolicy._paths import cache_root
from kernelpolicy.engines.sglang import plugin

from .test_plugin import ServerArgs, declare_resolution, fake_sglang  # noqa: F401  (fixture)

WHEELS = sorted((cache_root() / "wheels").glob("sglang-0.5.23-*.whl"))
pytestmark = pytest.mark.skipif(not WHEELS, reason="no sglang 0.5.23 wheel under ~/.cache/kernelpolicy/wheels")


def _module(name: str, source: str | None = None) -> types.ModuleType:
    mod = types.ModuleType(name)
    if source is not None:
        exec(compile(source, name, "exec"), mod.__dict__)  # SGLang's own file: stdlib imports only
    return mod


class Scheduler:
    def __init__(self, server_args: Any) -> None:
        self.server_args = server_args

    def init_moe_gemm_config(self) -> str:
        self.server_args.moe_runner_backend = "flashinfer_cutlass"  # as if a model override won
        return "configured"


class Fp8Config:
    def get_quant_method(self, layer: Any, prefix: str) -> Any:
        def triton_w8a8_block_fp8_linear() -> None: ...

        return types.SimpleNamespace(w8a8_block_fp8_linear=triton_w8a8_block_fp8_linear)


@pytest.fixture
def wheel_modules(fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:  # noqa: F811
    with zipfile.ZipFile(WHEELS[0]) as z:
        registry = _module("sglang.srt.plugins.hook_registry", z.read("sglang/srt/plugins/hook_registry.py").decode())
        hooks = _module(
            "sglang.srt.arg_groups.resolution_hooks", z.read("sglang/srt/arg_groups/resolution_hooks.py").decode()
        )
    scheduler = _module("sglang.srt.managers.scheduler")
    scheduler.Scheduler = Scheduler  # type: ignore[attr-defined]
    fp8 = _module("sglang.srt.layers.quantization.fp8")
    fp8.Fp8Config = Fp8Config  # type: ignore[attr-defined]
    mods = {
        "sglang.srt.plugins.hook_registry": registry,
        "sglang.srt.arg_groups.resolution_hooks": hooks,
        "sglang.srt.managers": _module("sglang.srt.managers"),
        "sglang.srt.managers.scheduler": scheduler,
        "sglang.srt.layers": _module("sglang.srt.layers"),
        "sglang.srt.layers.quantization": _module("sglang.srt.layers.quantization"),
        "sglang.srt.layers.quantization.fp8": fp8,
    }
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    for parent, child, mod in (
        ("sglang.srt", "managers", mods["sglang.srt.managers"]),
        ("sglang.srt.managers", "scheduler", scheduler),
        ("sglang.srt", "layers", mods["sglang.srt.layers"]),
        ("sglang.srt.layers", "quantization", mods["sglang.srt.layers.quantization"]),
        ("sglang.srt.layers.quantization", "fp8", fp8),
    ):
        setattr(sys.modules[parent], child, mod)
    monkeypatch.setattr(Scheduler, "init_moe_gemm_config", Scheduler.__dict__["init_moe_gemm_config"])
    monkeypatch.setattr(Fp8Config, "get_quant_method", Fp8Config.__dict__["get_quant_method"])
    return registry, hooks


def test_hooks_run_through_sglangs_own_registry(wheel_modules: Any) -> None:
    registry, hooks = wheel_modules
    plugin.register()
    registry.HookRegistry.apply_hooks()

    args = ServerArgs()
    seen: list[Any] = []

    def handle_model_specific_adjustments(server_args: Any) -> None:  # SGLang's built-in step
        seen.append(server_args)

    hooks.run_hook(handle_model_specific_adjustments, args)
    assert seen == [args]
    assert args._resolved_overrides == [
        (
            "kernelpolicy",
            {"fp8_gemm_runner_backend": "cutlass", "moe_runner_backend": "triton", "attention_backend": "flashinfer"},
        )
    ]  # the attention backend too, where the operator set none (issue 39)

    assert Scheduler(ServerArgs(fp8_gemm_runner_backend="cutlass")).init_moe_gemm_config() == "configured"
    assert any("moe_runner_backend=`flashinfer_cutlass`" in w for w in plugin.status()["warnings"])

    method = Fp8Config().get_quant_method(object(), prefix="model.layers.7.mlp.down_proj")
    assert method.w8a8_block_fp8_linear.__name__ == "triton_w8a8_block_fp8_linear"
    assert plugin.status()["fallbacks"][0]["layer"] == "model.layers.7.mlp.down_proj"
