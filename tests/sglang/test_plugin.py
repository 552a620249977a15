"""The SGLang plugin against fake SGLang modules shaped like the 0.5.23 and 0.5.12.post1 wheels.

The hooks are registered with a fake ``HookRegistry`` (same ``register(target, hook, type)``
signature) and called as SGLang's wrappers call them; the decision is the real resolver's, for
a GPU reported by a patched ``gpu_facts`` (no GPU, no SGLang needed).
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kernelpolicy.engines.sglang import _facts, plugin
from kernelpolicy.facts.gpu import facts_from_capability

MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"  # catalog: on sm121, dense cutlass and MoE triton, no DeepGEMM


class HookType(enum.Enum):
    BEFORE = "before"
    AFTER = "after"
    AROUND = "around"
    REPLACE = "replace"


class HookRegistry:
    registered: ClassVar[list[tuple[str, Callable[..., Any], HookType]]] = []

    @classmethod
    def register(cls, target: str, hook: Callable[..., Any], hook_type: HookType = HookType.AFTER) -> None:
        cls.registered.append((target, hook, hook_type))


class ServerArgs:
    """The fields the plugin reads, as SGLang's ``ServerArgs`` has them."""

    def __init__(self, **kw: Any) -> None:
        self.model_path = MODEL
        self.tp_size = 1
        self.ep_size = 1
        self.moe_runner_backend = "auto"
        self.fp8_gemm_runner_backend = "auto"
        self.fp4_gemm_runner_backend = "auto"
        self.attention_backend = None  # unset: SGLang chooses (issue #39)
        self.prefill_attention_backend = None
        self.decode_attention_backend = None
        self.__dict__.update(kw)


def declare_resolution(server_args: Any, source: str, **fields: Any) -> None:
    unknown = sorted(set(fields) - set(vars(ServerArgs())))
    if unknown:
        raise AttributeError(f"{source}: {unknown} are not ServerArgs fields")
    server_args.__dict__.setdefault("_resolved_overrides", []).append((source, dict(fields)))


@pytest.fixture
def fake_sglang(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    resolution: dict[str, list[Callable[..., Any]]] = {}

    def register_resolution_hook(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            resolution.setdefault(name, []).append(fn)
            return fn

        return deco

    mods = {
        "sglang": types.ModuleType("sglang"),
        "sglang.srt": types.ModuleType("sglang.srt"),
        "sglang.srt.plugins": types.ModuleType("sglang.srt.plugins"),
        "sglang.srt.plugins.hook_registry": types.ModuleType("sglang.srt.plugins.hook_registry"),
        "sglang.srt.arg_groups": types.ModuleType("sglang.srt.arg_groups"),
        "sglang.srt.arg_groups.resolution_hooks": types.ModuleType("sglang.srt.arg_groups.resolution_hooks"),
        "sglang.srt.arg_groups.overrides": types.ModuleType("sglang.srt.arg_groups.overrides"),
    }
    mods["sglang"].__version__ = "0.5.23"  # type: ignore[attr-defined]
    mods["sglang.srt.plugins.hook_registry"].HookRegistry = HookRegistry  # type: ignore[attr-defined]
    mods["sglang.srt.plugins.hook_registry"].HookType = HookType  # type: ignore[attr-defined]
    mods["sglang.srt.arg_groups.resolution_hooks"].register_resolution_hook = register_resolution_hook  # type: ignore[attr-defined]
    mods["sglang.srt.arg_groups.overrides"].declare_resolution = declare_resolution  # type: ignore[attr-defined]
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(HookRegistry, "registered", [])
    monkeypatch.setattr(plugin, "_STATE", plugin._State())
    monkeypatch.setattr(_facts, "gpu_facts", lambda: facts_from_capability(12, 1, "NVIDIA GB10"))
    for var in (
        "SGLANG_ENABLE_JIT_DEEPGEMM",
        "SGL_ENABLE_JIT_DEEPGEMM",
        plugin.SET_ENV,
        "KERNELPOLICY_STRICT",
        "KERNELPOLICY_DISABLE",
        "KERNELPOLICY_FACTS",
        "SGLANG_JIT_DEEPGEMM_PRECOMPILE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    yield {"modules": mods, "resolution": resolution}
    os.environ.pop("SGLANG_ENABLE_JIT_DEEPGEMM", None)
    os.environ.pop(plugin.SET_ENV, None)


def _hook(target_end: str) -> Callable[..., Any]:
    return next(h for t, h, _ in HookRegistry.registered if t.endswith(target_end))


def test_registers_at_the_scanned_selection_points(fake_sglang: dict[str, Any]) -> None:
    plugin.register()
    targets = {t: k for t, _, k in HookRegistry.registered}
    assert targets == {
        "sglang.srt.managers.scheduler.Scheduler.init_moe_gemm_config": HookType.AROUND,
        "sglang.srt.layers.quantization.fp8.Fp8Config.get_quant_method": HookType.AFTER,
        "sglang.srt.layers.moe.moe_runner.runner.MoeRunner.__init__": HookType.AFTER,
        "sglang.srt.models.deepseek_common.utils.tiny_router_gemm_max_tokens": HookType.AROUND,
        # from 0.5.23: the quant configs whose linears pick their GEMM per call or by runner
        **dict.fromkeys(plugin._LINEAR_CONFIGS, HookType.AFTER),
    }
    assert list(fake_sglang["resolution"]) == ["handle_model_specific_adjustments"]
    plugin.register()  # idempotent
    assert len(HookRegistry.registered) == 4 + len(plugin._LINEAR_CONFIGS)


def test_resolution_declares_the_decision_and_turns_deep_gemm_off(fake_sglang: dict[str, Any]) -> None:
    plugin.register()
    hook = fake_sglang["resolution"]["handle_model_specific_adjustments"][0]
    args = ServerArgs()
    calls: list[Any] = []
    hook(args, calls.append)
    assert calls == [args]  # SGLang's own step still runs
    decision = plugin.current_decision()
    assert decision.paths["dense"].backend == "cutlass" and decision.paths["moe"].backend == "triton"
    assert args._resolved_overrides == [
        (
            "kernelpolicy",
            {"fp8_gemm_runner_backend": "cutlass", "moe_runner_backend": "triton", "attention_backend": "flashinfer"},
        )
    ]
    assert os.environ["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0"
    assert os.environ[plugin.SET_ENV] == "SGLANG_ENABLE_JIT_DEEPGEMM"
    assert plugin.status()["applied"]["moe_runner_backend"] == "triton"


def test_the_environment_is_applied_when_no_flag_is_left_to_set(fake_sglang: dict[str, Any]) -> None:
    """The operator set both flags: nothing to declare, but DeepGEMM must still go off (the
    audit found the plugin skipping the environment then, so Marlin FP8 never took effect)."""
    plugin.register()
    hook = fake_sglang["resolution"]["handle_model_specific_adjustments"][0]
    args = ServerArgs(fp8_gemm_runner_backend="cutlass", moe_runner_backend="triton", attention_backend="flashinfer")
    hook(args, lambda a: None)
    assert not getattr(args, "_resolved_overrides", [])
    assert os.environ["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0"
    assert plugin.status()["applied"] == {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}


def test_an_operator_flag_is_left_alone(fake_sglang: dict[str, Any]) -> None:
    """SGLang's own `cutlass` MoE has no kernelpolicy id: the plugin does not touch it."""
    plugin.register()
    hook = fake_sglang["resolution"]["handle_model_specific_adjustments"][0]
    args = ServerArgs(moe_runner_backend="cutlass", attention_backend="flashinfer")
    hook(args, lambda a: None)
    assert args._resolved_overrides == [("kernelpolicy", {"fp8_gemm_runner_backend": "cutlass"})]


def test_the_decided_attention_backend_is_set_when_the_operator_set_none(fake_sglang: dict[str, Any]) -> None:
    """GB10 (sm121), an MHA model: SGLang's own default, FlashInfer, set as `--attention-backend`."""
    plugin.register()
    hook = fake_sglang["resolution"]["handle_model_specific_adjustments"][0]
    args = ServerArgs()
    hook(args, lambda a: None)
    assert plugin.current_decision().paths["attention"].backend == "flashinfer"
    assert args._resolved_overrides[0][1]["attention_backend"] == "flashinfer"
    assert plugin.status()["applied"]["attention_backend"] == "flashinfer"
    assert plugin.status()["conflicts"] == []


def test_an_operators_attention_backend_stands_and_a_different_one_is_a_conflict(
    fake_sglang: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """`--attention-backend triton` where the decision is FlashInfer: an explicit choice the
    decision keeps (triton runs the model) is no conflict; a per-phase backend kernelpolicy has
    no id for (`cutedsl_mla`) stands and is recorded as one."""
    plugin.register()
    hook = fake_sglang["resolution"]["handle_model_specific_adjustments"][0]
    args = ServerArgs(attention_backend="triton")
    hook(args, lambda a: None)
    assert plugin.current_decision().paths["attention"].backend == "triton_attn"  # the operator's choice
    assert "attention_backend" not in args._resolved_overrides[0][1]
    assert plugin.status()["conflicts"] == []

    plugin._begin_deployment()
    args = ServerArgs(decode_attention_backend="cutedsl_mla")
    with caplog.at_level(logging.WARNING):
        hook(args, lambda a: None)
    assert "attention_backend" not in args._resolved_overrides[0][1]  # the operator's phase backend stands
    assert plugin.status()["conflicts"] == [
        {
            "path": "attention",
            "flag": "--decode-attention-backend",
            "deployment": "cutedsl_mla",
            "decision": "flashinfer",
        }
    ]
    assert "--decode-attention-backend `cutedsl_mla`" in caplog.text


def test_release_0_5_12_sets_the_fields_after_post_init(fake_sglang: dict[str, Any]) -> None:
    fake_sglang["modules"]["sglang"].__version__ = "0.5.12.post1"
    plugin.register()
    assert fake_sglang["resolution"] == {}
    hook = _hook("ServerArgs._handle_model_specific_adjustments")
    args = ServerArgs()

    def original(self: Any) -> str:
        self.moe_runner_backend = "auto"  # 0.5.12.post1 mutates self; an `auto` stays auto on sm121
        return "done"

    assert hook(original, args) == "done"
    assert (args.fp8_gemm_runner_backend, args.moe_runner_backend) == ("cutlass", "triton")
    # its DeepSeek gate picks the router tier inside forward(): no point to hold it at
    assert not any(t.endswith("tiny_router_gemm_max_tokens") for t, _, _ in HookRegistry.registered)
    # the per-call linears' configs are named from 0.5.23's wheel only
    assert not set(plugin._LINEAR_CONFIGS) & {t for t, _, _ in HookRegistry.registered}


def test_unknown_release_one_warning_nothing_patched(
    fake_sglang: dict[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_sglang["modules"]["sglang"].__version__ = "0.5.24"  # after the newest release scanned
    with caplog.at_level(logging.WARNING, logger="kernelpolicy.sglang"):
        plugin.register()
    assert HookRegistry.registered == [] and fake_sglang["resolution"] == {}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "SGLang 0.5.24 is not a release" in lines[0] and "0.5.23" in lines[0]
    monkeypatch.setattr(plugin, "_STATE", plugin._State())
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    with pytest.raises(plugin.AdapterError, match="0.5.24"):
        plugin.register()


def test_scheduler_checks_what_sglang_resolved(fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    plugin.register()
    hook = _hook("init_moe_gemm_config")
    scheduler = types.SimpleNamespace(server_args=ServerArgs(fp8_gemm_runner_backend="cutlass"))

    def original(self: Any) -> None:
        self.server_args.moe_runner_backend = "flashinfer_cutlass"  # a model override won

    hook(original, scheduler)
    assert any(
        "moe_runner_backend=`flashinfer_cutlass`, the decision is `triton`" in w for w in plugin.status()["warnings"]
    )
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    scheduler = types.SimpleNamespace(server_args=ServerArgs(fp8_gemm_runner_backend="cutlass"))
    with pytest.raises(plugin.AdapterError, match="moe_runner_backend"):
        hook(original, scheduler)


def test_scheduler_reads_the_deployment_env_not_the_plugins(fake_sglang: dict[str, Any]) -> None:
    """The main process set SGLANG_ENABLE_JIT_DEEPGEMM=0; a scheduler decides as the main process did."""
    plugin.register()
    fake_sglang["resolution"]["handle_model_specific_adjustments"][0](ServerArgs(), lambda a: None)
    main_fp = plugin.current_decision().fingerprint
    plugin._STATE = plugin._State()  # a fresh scheduler process inherits os.environ
    plugin.register()
    _hook("init_moe_gemm_config")(lambda self: None, types.SimpleNamespace(server_args=ServerArgs()))
    assert plugin.current_decision().fingerprint == main_fp


def triton_w8a8_block_fp8_linear() -> None: ...


def cutlass_w8a8_block_fp8_linear_with_fallback() -> None: ...


def test_a_layer_that_falls_back_is_named(fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    plugin.register()
    fake_sglang["resolution"]["handle_model_specific_adjustments"][0](ServerArgs(), lambda a: None)
    hook = _hook("get_quant_method")
    ok = types.SimpleNamespace(w8a8_block_fp8_linear=cutlass_w8a8_block_fp8_linear_with_fallback)
    hook(ok, object(), object(), "model.layers.0.self_attn.qkv_proj")
    assert plugin.status()["fallbacks"] == []
    bad = types.SimpleNamespace(w8a8_block_fp8_linear=functools.partial(triton_w8a8_block_fp8_linear))
    hook(bad, object(), object(), "model.layers.3.mlp.shared_expert.down_proj")
    assert plugin.status()["fallbacks"] == [
        {
            "layer": "model.layers.3.mlp.shared_expert.down_proj",
            "runs": "triton_w8a8_block_fp8_linear",
            "decided": "cutlass",
        }
    ]
    assert any("layer `model.layers.3.mlp.shared_expert.down_proj`" in w for w in plugin.status()["warnings"])
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    with pytest.raises(plugin.AdapterError, match=r"layers\.4"):
        hook(bad, object(), object(), "model.layers.4.mlp.down_proj")


def test_disable_env(fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPOLICY_DISABLE", "1")
    plugin.register()
    assert HookRegistry.registered == [] and plugin.status()["hooks"] == []


def test_sglang_switches_that_contradict_the_decision_are_reported(
    fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGL_ENABLE_JIT_DEEPGEMM", "1")
    monkeypatch.setenv("USE_TRITON_W8A8_FP8_KERNEL", "1")
    plugin.register()
    fake_sglang["resolution"]["handle_model_specific_adjustments"][0](ServerArgs(), lambda a: None)
    warnings = plugin.status()["warnings"]
    assert any("SGL_ENABLE_JIT_DEEPGEMM=1 wins over SGLANG_ENABLE_JIT_DEEPGEMM=0" in w for w in warnings)
    assert any("dense backend is `cutlass`, the deployment sets USE_TRITON_W8A8_FP8_KERNEL=1" in w for w in warnings)


class MoeRunnerBackend(enum.Enum):
    TRITON = "triton"
    FLASHINFER_CUTLASS = "flashinfer_cutlass"
    AUTO = "auto"


def test_a_moe_layer_on_another_runner_is_named(fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    plugin.register()
    fake_sglang["resolution"]["handle_model_specific_adjustments"][0](ServerArgs(), lambda a: None)
    hook = _hook("MoeRunner.__init__")
    hook(None, object(), MoeRunnerBackend.TRITON, types.SimpleNamespace(layer_id=0))
    hook(None, object(), MoeRunnerBackend.AUTO, types.SimpleNamespace(layer_id=1))
    assert plugin.status()["fallbacks"] == []
    hook(None, object(), MoeRunnerBackend.FLASHINFER_CUTLASS, config=types.SimpleNamespace(layer_id=5))
    assert plugin.status()["fallbacks"] == [{"layer": "MoE layer 5", "runs": "flashinfer_cutlass", "decided": "triton"}]
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    with pytest.raises(plugin.AdapterError, match="MoE layer 6 runs the `flashinfer_cutlass` MoE runner"):
        hook(None, object(), MoeRunnerBackend.FLASHINFER_CUTLASS, types.SimpleNamespace(layer_id=6))


def test_the_plugin_says_the_engine_is_sglang_and_reads_its_all_to_all(fake_sglang: dict[str, Any]) -> None:
    plugin.register()
    hook = fake_sglang["resolution"]["handle_model_specific_adjustments"][0]
    hook(ServerArgs(moe_a2a_backend="deepep", ep_size=4), lambda args: None)
    facts = plugin.current_decision().facts.values
    assert facts["deploy.engine"] == "sglang"  # SGLang-only rules apply in SGLang's processes
    assert facts["deploy.all2all"] == "deepep"


DEEPSEEK = "deepseek-ai/DeepSeek-V3"  # hidden 7168, 256 experts: SGLang 0.5.23's tiny GEMM on sm >= 90


def _router_tier(fake_sglang: dict[str, Any], rows: int, policy: Path | None = None) -> int:
    import kernelpolicy as kp

    if policy is not None:
        layered = kp.load_policy(policy)
        plugin.set_resolver(lambda facts: kp.resolve(facts, layered))
    plugin.register()
    fake_sglang["resolution"]["handle_model_specific_adjustments"][0](ServerArgs(model_path=DEEPSEEK), lambda a: None)

    def original(*, num_experts: int, hidden_size: int, weight_dtype: object) -> int:
        return rows

    result: int = _hook("tiny_router_gemm_max_tokens")(
        original, num_experts=256, hidden_size=7168, weight_dtype="bfloat16"
    )
    return result


def test_the_router_tier_sglang_allows_stands_when_the_decision_runs_it(fake_sglang: dict[str, Any]) -> None:
    assert _router_tier(fake_sglang, 16) == 16
    assert plugin.current_decision().paths["router"].backend == "tiny_gemm"
    assert plugin.status()["warnings"] == [] and "router" not in plugin.status()["applied"]


def test_a_router_tier_the_decision_denies_is_held_off(fake_sglang: dict[str, Any], tmp_path: Path) -> None:
    policy = tmp_path / "no-tiny-gemm.yaml"
    policy.write_text(
        "rules:\n  - id: ops-no-tiny-gemm\n    deny: tiny_gemm\n    paths: [router]\n"
        "    severity: accuracy\n    because: an operator's choice\n"
    )
    assert _router_tier(fake_sglang, 16, policy) == -1  # the gate runs cuBLAS
    assert plugin.current_decision().paths["router"].backend == "cublas"
    assert plugin.status()["applied"]["router"] == "cublas"


def test_a_router_tier_sglang_rules_out_is_a_mismatch(
    fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _router_tier(fake_sglang, -1) == -1
    assert any("router is `tiny_gemm`, SGLang rules it out" in w for w in plugin.status()["warnings"])
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    with pytest.raises(plugin.AdapterError, match="rules it out"):
        _hook("tiny_router_gemm_max_tokens")(
            lambda **kw: -1, num_experts=256, hidden_size=7168, weight_dtype="bfloat16"
        )


def test_a_gate_that_never_runs_the_tiny_gemm_is_left_alone(fake_sglang: dict[str, Any], tmp_path: Path) -> None:
    """A decision of a plain `linear` router: fine where SGLang rules the tiny GEMM out itself (an FP32
    gate weight), a mismatch where holding the tiny GEMM off would leave the gate on cuBLAS."""
    policy = tmp_path / "plain-router.yaml"
    policy.write_text(
        "rules:\n  - id: ops-plain-router\n    deny: [tiny_gemm, cublas]\n    paths: [router]\n"
        "    severity: accuracy\n    because: an operator's choice\n"
    )
    assert _router_tier(fake_sglang, -1, policy) == -1
    assert plugin.current_decision().paths["router"].backend == "linear"
    assert plugin.status()["warnings"] == [] and "router" not in plugin.status()["applied"]
    rows = _hook("tiny_router_gemm_max_tokens")(lambda **kw: 16, num_experts=256, hidden_size=7168, weight_dtype="x")
    assert rows == -1
    assert any("router is `linear`; held off `tiny_gemm`" in w for w in plugin.status()["warnings"])


def test_a_stated_fact_contradicting_sglangs_config_is_a_conflict_sglang_decides(
    fake_sglang: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`KERNELPOLICY_FACTS` stating a tensor-parallel size SGLang does not run: reported in the
    plugin's status, and SGLang's own `--tp-size` decides (it decided with the stated one)."""
    monkeypatch.setenv("KERNELPOLICY_FACTS", '{"deploy.tp": 2, "deploy.all2all": "deepep"}')
    plugin.register()
    hook = fake_sglang["resolution"]["handle_model_specific_adjustments"][0]
    hook(ServerArgs(tp_size=4), lambda args: None)
    facts = plugin.current_decision().facts
    assert facts.get("deploy.tp") == 4 and facts.sources["deploy.tp"] == "sglang"
    assert facts.get("deploy.all2all") == "deepep"  # a fact SGLang's config does not hold: stated, kept
    warnings = plugin.status()["warnings"]
    conflict = "KERNELPOLICY_FACTS states `deploy.tp` = `2`, but SGLang runs with `4`: a conflict, the engine's value"
    assert any(conflict in w for w in warnings), warnings
    assert any(conflict in w for w in plugin.current_decision().warnings)  # the decision records it
