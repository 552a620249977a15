"""Patch mechanics of the vLLM plugin against fake vLLM modules (no vLLM needed)."""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from packaging.version import Version

from kernelpolicy.engines.vllm import plugin
from kernelpolicy.releases.vllm import versions as _versions
from kernelpolicy.releases.vllm.versions import release_records


@dataclasses.dataclass(frozen=True)
class _Cand:
    backend: str
    verdict: str


@dataclasses.dataclass(frozen=True)
class _Path:
    backend: str | None
    rule: str | None = None
    candidates: tuple[_Cand, ...] = ()


@dataclasses.dataclass(frozen=True)
class _Decision:
    paths: dict[str, _Path]
    warmup: tuple[str, ...] = ()
    fingerprint: str = "sha256:" + "0" * 64


SEED = _Decision(
    paths={
        "dense": _Path("cutlass", "r1", (_Cand("deep_gemm", "rejected"), _Cand("cutlass", "chosen"))),
        "moe": _Path("triton", "r1", (_Cand("deep_gemm", "rejected"), _Cand("triton", "chosen"))),
        "router": _Path("linear"),
        "warmup": _Path(None),
    }
)


class DeepGemmFp8BlockScaledMMKernel: ...


class CutlassFp8BlockScaledMMKernel: ...


class TritonFp8BlockScaledMMKernel: ...


@dataclasses.dataclass
class FusedMoEConfig:
    moe_backend: str = "auto"


def _module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for k in saved:
        del sys.modules[k]
    calls: dict[str, Any] = {}

    def choose(config: Any, possible_kernels: Any, compute_capability: Any = None, force_kernel: Any = None) -> Any:
        calls["dense_table"] = [k.__name__ for k in possible_kernels["CUDA"]]
        return possible_kernels["CUDA"][0]

    def select(config: Any, weight_key: Any, activation_key: Any, allow_vllm_cutlass: bool = False) -> Any:
        calls["moe_backend"] = config.moe_backend
        return ("DEEPGEMM" if config.moe_backend == "auto" else config.moe_backend.upper(), None)

    def auto_disable(model_type: Any) -> bool:
        return False

    class GateLinear:
        def __init__(self, h: int, e: int) -> None:
            self.allow_bf16x3_router_gemm = True
            self.allow_cublas_router_gemm = True
            self.allow_specialized_router_gemm = True

        def set_out_dtype(self, dtype: Any) -> None:
            self.allow_cublas_router_gemm = True

    table = {"CUDA": [DeepGemmFp8BlockScaledMMKernel, CutlassFp8BlockScaledMMKernel, TritonFp8BlockScaledMMKernel]}
    _module("vllm", __version__="0.26.0")
    _module("vllm.utils")
    utils = _module("vllm.utils.deep_gemm", should_auto_disable_deep_gemm=auto_disable)
    _module(_versions.DG_KERNEL_MODULE, should_auto_disable_deep_gemm=auto_disable)
    dense = _module(
        _versions.DENSE_MODULE,
        choose_scaled_mm_linear_kernel=choose,
        _POSSIBLE_FP8_BLOCK_KERNELS=table,
        _POSSIBLE_FP8_KERNELS={"CUDA": []},
    )
    oracle = _module(_versions.MOE_ORACLE_MODULE, select_fp8_moe_backend=select)
    fp8 = _module("vllm.model_executor.layers.quantization.fp8", select_fp8_moe_backend=select)
    warm = _module(
        _versions.WARMUP_MODULE,
        _fp8_linear_may_use_deep_gemm=lambda m: True,
        _fused_moe_grouped_gemm_may_use_deep_gemm=lambda m: True,
    )
    gate = _module(_versions.GATE_LINEAR_MODULE, GateLinear=GateLinear)
    oracles = _fake_oracles(calls)
    config = types.SimpleNamespace(model_config=object())
    _module("vllm.config", get_current_vllm_config_or_none=lambda: config)

    class VllmConfig:  # the config step before which the operator's attention backend is read
        def try_verify_and_update_config(self) -> None:
            calls["verified"] = True

    def get_attn_backend(*args: Any, **kwargs: Any) -> Any:
        calls.setdefault("attention", []).append(None)
        return None

    _module("vllm.config.vllm", VllmConfig=VllmConfig)
    _module("vllm.v1.attention.selector", get_attn_backend=get_attn_backend)
    monkeypatch.setattr("kernelpolicy.engines.vllm._facts.facts_from_vllm", lambda c, catalog=(): {"gpu.sm": "sm121"})
    plugin.set_resolver(lambda values: SEED)
    yield {
        "calls": calls,
        "dense": dense,
        "oracle": oracle,
        "fp8": fp8,
        "warm": warm,
        "gate": gate,
        "utils": utils,
        "originals": (choose, select, auto_disable, GateLinear.__init__),
        **oracles,
    }
    plugin.unpatch()
    plugin.set_resolver(None)
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    sys.modules.update(saved)


class Mxfp4MoeBackend(enum.Enum):
    DEEPGEMM_MXFP4 = "DEEPGEMM_MXFP4"
    MARLIN = "MARLIN"
    TRITON = "TRITON"
    B12X_MXFP4_MXFP8 = "B12X_MXFP4_MXFP8"


class NvFp4MoeBackend(enum.Enum):
    FLASHINFER_CUTLASS = "FLASHINFER_CUTLASS"
    VLLM_CUTLASS = "VLLM_CUTLASS"
    MARLIN = "MARLIN"


class Fp8MoeBackend(enum.Enum):
    DEEPGEMM = "DEEPGEMM"
    MARLIN = "MARLIN"


#: what each fake oracle picks on "auto", and the names it maps (like vLLM's name maps)
_FAKE_ORACLES: dict[str, tuple[Any, str, dict[str, str]]] = {
    "mxfp4": (
        Mxfp4MoeBackend,
        "DEEPGEMM_MXFP4",
        {"deep_gemm": "DEEPGEMM_MXFP4", "marlin": "MARLIN", "triton": "TRITON", "b12x": "B12X_MXFP4_MXFP8"},
    ),
    "nvfp4": (NvFp4MoeBackend, "FLASHINFER_CUTLASS", {"cutlass": "VLLM_CUTLASS", "marlin": "MARLIN"}),
    "mxfp8": (Fp8MoeBackend, "DEEPGEMM", {"deep_gemm": "DEEPGEMM", "marlin": "MARLIN"}),
}
_Q = "vllm.model_executor.layers.quantization."


def _fake_select(calls: dict[str, Any], scheme: str) -> Callable[..., Any]:
    enum_cls, auto, names = _FAKE_ORACLES[scheme]

    def select(config: Any, *args: Any, **kwargs: Any) -> Any:
        calls.setdefault(scheme, []).append(config.moe_backend)
        if config.moe_backend == "auto":
            return enum_cls[auto], None
        if config.moe_backend not in names or names[config.moe_backend] in calls.get("refuse", ()):
            raise ValueError(f"moe_backend={config.moe_backend!r} is not supported for {scheme}")
        return enum_cls[names[config.moe_backend]], None

    return select


def _fake_oracles(calls: dict[str, Any]) -> dict[str, Any]:
    mx4 = _fake_select(calls, "mxfp4")
    dsv4 = _fake_select(calls, "mxfp4")
    nv4 = _fake_select(calls, "nvfp4")
    mx8 = _fake_select(calls, "mxfp8")
    oracle = "vllm.model_executor.layers.fused_moe.oracle."
    return {
        "mxfp4": _module(oracle + "mxfp4", select_mxfp4_moe_backend=mx4, select_deepseek_v4_mxfp4_moe_backend=dsv4),
        "q_mxfp4": _module(_Q + "mxfp4", select_mxfp4_moe_backend=mx4, select_deepseek_v4_mxfp4_moe_backend=dsv4),
        "nvfp4": _module(oracle + "nvfp4", select_nvfp4_moe_backend=nv4),
        "modelopt": _module(_Q + "modelopt", select_nvfp4_moe_backend=nv4, select_mxfp8_moe_backend=mx8),
        "mxfp8": _module(oracle + "mxfp8", select_mxfp8_moe_backend=mx8),
        "oracle_originals": {"mx4": mx4, "dsv4": dsv4, "nv4": nv4, "mx8": mx8},
    }


#: DeepSeek-V4-Flash on GB10: MXFP4 experts, DeepGEMM FP8xFP4 rejected, Marlin chosen.
DSV4_GB10 = _Decision(
    paths={
        "dense": _Path("cutlass", "r1", (_Cand("deep_gemm", "rejected"), _Cand("cutlass", "chosen"))),
        "moe": _Path(
            "marlin",
            "deep_gemm-mxfp4-gb10-scale-packing",
            (_Cand("deep_gemm", "rejected"), _Cand("marlin", "chosen"), _Cand("emulation", "viable")),
        ),
        "router": _Path("cublas"),
        "warmup": _Path(None),
    }
)


def _moe_decision(chosen: str, *cands: tuple[str, str]) -> _Decision:
    return _Decision(paths={"moe": _Path(chosen, "r", tuple(_Cand(b, v) for b, v in cands))})


def test_mxfp4_oracles_force_the_decided_backend(fake_vllm: dict[str, Any]) -> None:
    plugin.set_resolver(lambda values: DSV4_GB10)
    plugin.register()
    f = fake_vllm
    cfg = FusedMoEConfig()
    for mod in (f["mxfp4"], f["q_mxfp4"]):
        assert mod.select_deepseek_v4_mxfp4_moe_backend(cfg)[0] is Mxfp4MoeBackend.MARLIN
        assert mod.select_mxfp4_moe_backend(cfg, None)[0] is Mxfp4MoeBackend.MARLIN
    assert set(f["calls"]["mxfp4"]) == {"marlin"}
    assert cfg.moe_backend == "auto"  # forced on a copy
    patched = plugin.status()["patched"]
    assert "moe.mxfp4:select_deepseek_v4_mxfp4_moe_backend" in patched
    assert f"moe.mxfp4:{_Q}mxfp4" in patched
    # NVFP4 / MXFP8 oracles get the decided backend by their own names
    assert f["nvfp4"].select_nvfp4_moe_backend(cfg, None, None)[0] is NvFp4MoeBackend.MARLIN
    assert f["modelopt"].select_mxfp8_moe_backend(cfg)[0] is Fp8MoeBackend.MARLIN


def test_oracle_names_differ_per_release(fake_vllm: dict[str, Any]) -> None:
    """`flashinfer_b12x` is `b12x` to the MXFP4 oracle from 0.29 on; before, vLLM's pick stands
    unless the decision rejects it, and then the first viable backend the oracle names is forced."""
    b12x = _moe_decision(
        "flashinfer_b12x", ("deep_gemm", "rejected"), ("flashinfer_b12x", "chosen"), ("marlin", "viable")
    )
    plugin.set_resolver(lambda values: b12x)
    sys.modules["vllm"].__dict__["__version__"] = "0.33.0"
    plugin.register()
    assert fake_vllm["mxfp4"].select_mxfp4_moe_backend(FusedMoEConfig())[0] is Mxfp4MoeBackend.B12X_MXFP4_MXFP8
    plugin.unpatch()
    sys.modules["vllm"].__dict__["__version__"] = "0.26.0"
    plugin.set_resolver(lambda values: b12x)
    plugin.register()
    assert fake_vllm["mxfp4"].select_mxfp4_moe_backend(FusedMoEConfig())[0] is Mxfp4MoeBackend.MARLIN
    assert fake_vllm["calls"]["mxfp4"][-2:] == ["auto", "marlin"]
    # not rejected: vLLM's own pick stands
    plugin.set_resolver(lambda values: _moe_decision("flashinfer_b12x", ("flashinfer_b12x", "chosen")))
    assert fake_vllm["mxfp4"].select_mxfp4_moe_backend(FusedMoEConfig())[0] is Mxfp4MoeBackend.DEEPGEMM_MXFP4


def test_oracle_refusal_falls_back_to_the_next_valid_candidate(
    fake_vllm: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """vLLM refusing the decided backend never stops a start-up that works without the plugin."""
    plugin.set_resolver(lambda values: DSV4_GB10)  # marlin chosen, emulation viable after it
    plugin.register()
    fake_vllm["calls"]["refuse"] = ("MARLIN",)
    backend, _ = fake_vllm["q_mxfp4"].select_deepseek_v4_mxfp4_moe_backend(FusedMoEConfig())
    # the decided marlin, then the next valid candidate (emulation) are refused: vLLM's own pick stands
    assert fake_vllm["calls"]["mxfp4"] == ["marlin", "emulation", "auto"]
    assert backend is Mxfp4MoeBackend.DEEPGEMM_MXFP4
    (fallback,) = plugin.status()["fallbacks"]
    assert fallback["decided"] == "marlin" and fallback["path"] == "moe"
    assert fallback["used"] == "DEEPGEMM_MXFP4 (vLLM's own)"
    assert "refused `marlin`" in fallback["reason"] and "`emulation`" in fallback["reason"]
    warnings = [r.message for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "`marlin`" in warnings[0], warnings


def test_oracle_refusal_falls_back_in_decision_order(fake_vllm: dict[str, Any]) -> None:
    decision = _moe_decision(
        "flashinfer_b12x",
        ("flashinfer_b12x", "chosen"),
        ("deep_gemm", "rejected"),
        ("triton", "viable"),
        ("marlin", "viable"),
    )
    plugin.set_resolver(lambda values: decision)
    plugin.register()
    fake_vllm["calls"]["refuse"] = ("B12X_MXFP4_MXFP8",)
    backend, _ = fake_vllm["mxfp4"].select_mxfp4_moe_backend(FusedMoEConfig())
    assert backend is Mxfp4MoeBackend.TRITON, "the first viable candidate after the decided one"
    (fallback,) = plugin.status()["fallbacks"]
    assert fallback == {**fallback, "decided": "flashinfer_b12x", "used": "triton"}
    assert any("moe uses `triton`" in w and "`flashinfer_b12x`" in w for w in plugin.status()["warnings"])


def test_oracle_refusal_stops_start_up_when_strict(fake_vllm: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    plugin.set_resolver(lambda values: DSV4_GB10)
    plugin.register()
    fake_vllm["calls"]["refuse"] = ("MARLIN",)
    with pytest.raises(plugin.AdapterError, match="MXFP4 MoE oracle refused the decided MoE backend `marlin`"):
        fake_vllm["q_mxfp4"].select_deepseek_v4_mxfp4_moe_backend(FusedMoEConfig())
    # a rejected pick with nothing the oracle can name instead
    plugin.set_resolver(lambda values: _moe_decision("flashinfer_cutedsl", ("deep_gemm", "rejected")))
    with pytest.raises(plugin.AdapterError, match="can select no backend the decision allows"):
        fake_vllm["mxfp8"].select_mxfp8_moe_backend(FusedMoEConfig())


def test_fp8_oracle_refusal_falls_back(fake_vllm: dict[str, Any]) -> None:
    def select(config: Any, *args: Any, **kwargs: Any) -> Any:
        if config.moe_backend == "triton":
            raise ValueError("triton is not supported for this configuration")
        return (config.moe_backend.upper(), None)

    decision = _moe_decision("triton", ("deep_gemm", "rejected"), ("triton", "chosen"), ("marlin", "viable"))
    plugin.set_resolver(lambda values: decision)
    fake_vllm["oracle"].select_fp8_moe_backend = select
    fake_vllm["fp8"].select_fp8_moe_backend = select
    plugin.register()
    assert fake_vllm["fp8"].select_fp8_moe_backend(FusedMoEConfig(), None, None) == ("MARLIN", None)
    assert plugin.status()["fallbacks"][0]["used"] == "marlin"


def test_oracle_patches_are_idempotent_and_reversible(fake_vllm: dict[str, Any]) -> None:
    plugin.set_resolver(lambda values: DSV4_GB10)
    plugin.register()
    first = list(plugin.status()["patched"])
    plugin.register()
    assert plugin.status()["patched"] == first
    late = _module(_Q + "quark.quark_moe", select_mxfp4_moe_backend=fake_vllm["mxfp4"].select_mxfp4_moe_backend)
    plugin.unpatch()
    o = fake_vllm["oracle_originals"]
    assert fake_vllm["mxfp4"].select_mxfp4_moe_backend is o["mx4"]
    assert fake_vllm["q_mxfp4"].select_deepseek_v4_mxfp4_moe_backend is o["dsv4"]
    assert fake_vllm["modelopt"].select_nvfp4_moe_backend is o["nv4"]
    assert fake_vllm["modelopt"].select_mxfp8_moe_backend is o["mx8"]
    assert late.select_mxfp4_moe_backend is o["mx4"]


def test_oracle_name_tables_cover_the_enums() -> None:
    from kernelpolicy.releases.vllm.names import MOE_ORACLE_BACKENDS, MOE_ORACLE_NAMES

    latest = list(_versions.SUPPORTED.values())[-1]  # the newest scanned release
    for oracle in latest.moe_oracles:
        members = {m for ms in MOE_ORACLE_BACKENDS[oracle.scheme].values() for m in ms}
        assert set(MOE_ORACLE_NAMES[oracle.scheme].values()) <= set(oracle.names)
        assert members - set(oracle.backends) <= {"NATIVE_MXFP8"}  # 0.24's MXFP8 triton member
    mxfp8 = next(o for o in latest.moe_oracles if o.scheme == "mxfp8")
    assert mxfp8.backends == tuple(latest.record["moe"]["fp8"]["backends"])  # MXFP8 shares Fp8MoeBackend


def test_patches_apply_the_decision_everywhere(fake_vllm: dict[str, Any]) -> None:
    plugin.register()
    f = fake_vllm
    assert (
        f["dense"].choose_scaled_mm_linear_kernel(None, f["dense"]._POSSIBLE_FP8_BLOCK_KERNELS)
        is CutlassFp8BlockScaledMMKernel
    )
    assert f["calls"]["dense_table"] == ["CutlassFp8BlockScaledMMKernel", "TritonFp8BlockScaledMMKernel"]
    assert f["fp8"].select_fp8_moe_backend(FusedMoEConfig(), None, None) == ("TRITON", None)
    assert f["oracle"].select_fp8_moe_backend(FusedMoEConfig(), None, None)[0] == "TRITON"
    assert f["warm"]._fp8_linear_may_use_deep_gemm(object()) is False
    assert f["warm"]._fused_moe_grouped_gemm_may_use_deep_gemm(object()) is False
    layer = f["gate"].GateLinear(2048, 256)
    assert not layer.allow_bf16x3_router_gemm and not layer.allow_cublas_router_gemm
    assert f["utils"].should_auto_disable_deep_gemm("qwen3_5_moe_text") is True
    assert sys.modules[_versions.DG_KERNEL_MODULE].should_auto_disable_deep_gemm("x") is True


def test_register_is_idempotent_and_unpatch_restores(fake_vllm: dict[str, Any]) -> None:
    plugin.register()
    first = list(plugin.status()["patched"])
    plugin.register()
    assert plugin.status()["patched"] == first
    plugin.unpatch()
    choose, select, auto_disable, init = fake_vllm["originals"]
    assert fake_vllm["dense"].choose_scaled_mm_linear_kernel is choose
    assert fake_vllm["oracle"].select_fp8_moe_backend is select
    assert fake_vllm["fp8"].select_fp8_moe_backend is select
    assert fake_vllm["utils"].should_auto_disable_deep_gemm is auto_disable
    assert fake_vllm["gate"].GateLinear.__init__ is init


def test_unsupported_version_warns_once_and_patches_nothing(
    fake_vllm: dict[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    sys.modules["vllm"].__dict__["__version__"] = "0.40.0"
    plugin.register()
    assert plugin.status()["patched"] == []
    assert sum("not a release this plugin knows" in r.message for r in caplog.records) == 1
    # the releases it names are the release data's (it said "0.24-0.33", a stale copy, with 0.34 known)
    scanned = [Version(v) for v in release_records()]
    first, last = min(scanned), max(scanned)
    span = f"knows ({first.major}.{first.minor}-{last.major}.{last.minor});"
    assert sum(span in r.message for r in caplog.records) == 1, [r.message for r in caplog.records]
    plugin.unpatch()
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    with pytest.raises(plugin.AdapterError):
        plugin.register()


def test_agreement_report_names_ranks_and_facts() -> None:
    report = plugin.agreement_report(
        [
            {"rank": 0, "fingerprint": "sha256:a", "summary": "moe=triton", "facts": {"gpu.sm": "sm121"}},
            {"rank": 1, "fingerprint": "sha256:b", "summary": "moe=deep_gemm", "facts": {"gpu.sm": "sm100"}},
        ]
    )
    assert report is not None and "ranks [1]" in report and "gpu.sm" in report


def test_core_resolver_maps_vllm_backend_names() -> None:
    """vLLM's `--moe-backend cutlass` is kernelpolicy's `vllm_cutlass`, not an unknown id."""
    from kernelpolicy.engines.vllm.plugin import _core_resolver, _pipeline_facts

    values = {
        "gpu.sm": "sm90",
        "gpu.family": "sm90",
        "model.type": "deepseek_v3",
        "model.is_moe": True,
        "quant.scheme": "fp8_channel",
        "quant.moe_scheme": "fp8_channel",
        "deploy.moe_backend": "cutlass",
    }
    decision: Any = _core_resolver(_pipeline_facts(values))
    assert decision.facts.get("deploy.moe_backend") == "vllm_cutlass"
    assert decision.paths["moe"].backend == "vllm_cutlass"


def test_dense_table_without_an_allowed_kernel_falls_back_to_vllms_own(
    fake_vllm: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def choose(config: Any, possible_kernels: Any, compute_capability: Any = None, force_kernel: Any = None) -> Any:
        if not possible_kernels["CUDA"]:
            raise ValueError("Failed to find a kernel that can implement the ScaledMM linear layer.")
        return possible_kernels["CUDA"][0]

    rejects_all = _Decision(
        paths={
            "dense": _Path(
                "flashinfer_cutlass",
                "r",
                (
                    _Cand("deep_gemm", "rejected"),
                    _Cand("cutlass", "rejected"),
                    _Cand("triton", "rejected"),
                    _Cand("flashinfer_cutlass", "chosen"),
                ),
            )
        }
    )
    fake_vllm["dense"].choose_scaled_mm_linear_kernel = choose
    plugin.set_resolver(lambda values: rejects_all)
    plugin.register()
    table = fake_vllm["dense"]._POSSIBLE_FP8_BLOCK_KERNELS
    assert fake_vllm["dense"].choose_scaled_mm_linear_kernel(None, table) is DeepGemmFp8BlockScaledMMKernel
    (record,) = plugin.status()["fallbacks"]
    assert record["path"] == "dense" and record["used"] == "DeepGemmFp8BlockScaledMMKernel (vLLM's own)"
    plugin.unpatch()
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    fake_vllm["dense"].choose_scaled_mm_linear_kernel = choose
    plugin.register()
    with pytest.raises(plugin.AdapterError, match="no kernel the decision allows"):
        fake_vllm["dense"].choose_scaled_mm_linear_kernel(None, table)


def test_known_span_names_runs_of_minors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gap in the scanned minors is not papered over by one range."""
    monkeypatch.setattr(_versions, "SUPPORTED", dict.fromkeys(["0.9", "0.24", "0.25", "0.26", "0.28", "1.0"]))
    assert _versions.known_span() == "0.9, 0.24-0.26, 0.28, 1.0"


def _router_decision(chosen: str, *viable: str) -> _Decision:
    cands = (_Cand(chosen, "chosen"), *(_Cand(b, "viable") for b in viable))
    return dataclasses.replace(SEED, paths={**SEED.paths, "router": _Path(chosen, None, cands)})


class _FakeGate:
    """A GateLinear as vLLM 0.34 builds it on sm90 for an FP32 weight (out_dtype FP32): the BF16
    tiers are off (they need a BF16 weight), BF16x3 is on."""

    def __init__(self, h: int, e: int) -> None:
        self.weight = types.SimpleNamespace(dtype="torch.float32")
        self.out_dtype = "torch.float32"
        self.allow_specialized_router_gemm = True
        self.allow_ll_bf16_gemm = False
        self.allow_fp32_router_gemm = False
        self.allow_bf16x3_router_gemm = True
        self.allow_cublas_router_gemm = False


def test_router_keeps_the_next_valid_tier_vllm_enabled(fake_vllm: dict[str, Any]) -> None:
    """The decided tier off for a gate (its weight dtype rules it out): the plugin used to clear
    every tier, so the gate fell to F.linear in FP32 where vLLM alone ran BF16x3 (the 0.34 sweep,
    gpt-oss on sm90); it keeps the decision's next valid tier vLLM enabled, with one warning."""
    fake_vllm["gate"].GateLinear = _FakeGate
    plugin.set_resolver(lambda values: _router_decision("ll_bf16", "bf16x3", "cublas", "linear", "linear_fp32"))
    plugin.register()
    gates = [fake_vllm["gate"].GateLinear(2880, 128) for _ in range(3)]
    assert all(g.allow_bf16x3_router_gemm and g.allow_specialized_router_gemm for g in gates)
    assert not any(g.allow_ll_bf16_gemm or g.allow_cublas_router_gemm for g in gates)
    (fallback,) = plugin.status()["fallbacks"]  # one record for every gate alike
    assert fallback == {**fallback, "path": "router", "decided": "ll_bf16", "used": "bf16x3"}
    assert "`float32` weight" in fallback["reason"]
    assert any("router uses `bf16x3`" in w for w in plugin.status()["warnings"])


def test_router_clears_the_other_tiers_when_the_decided_one_runs(fake_vllm: dict[str, Any]) -> None:
    fake_vllm["gate"].GateLinear = _FakeGate
    plugin.set_resolver(lambda values: _router_decision("bf16x3", "linear_fp32"))
    plugin.register()
    gate = fake_vllm["gate"].GateLinear(4096, 512)
    assert gate.allow_bf16x3_router_gemm and plugin.status()["fallbacks"] == []
    # no tier of the decision enabled: a plain linear, said once
    plugin.unpatch()
    plugin.set_resolver(lambda values: _router_decision("cublas", "linear"))
    plugin.register()
    gate = fake_vllm["gate"].GateLinear(4096, 512)
    assert not gate.allow_bf16x3_router_gemm and not gate.allow_specialized_router_gemm
    assert [f["used"] for f in plugin.status()["fallbacks"]] == ["linear"]


class MacheteLinearKernel:
    ok = True


class HummingLinearKernel:
    ok = True


class MarlinLinearKernel:
    ok = True


def _install_mp(fake_vllm: dict[str, Any]) -> tuple[Any, types.ModuleType]:
    """vLLM 0.34's ``choose_mp_linear_kernel`` in the fake dense module (Humming moved ahead of
    Marlin, as ``prioritize_humming`` does on sm90), and a GPTQ module that imported it by name."""
    dense = fake_vllm["dense"]

    def choose_mp_linear_kernel(config: Any, compute_capability: Any = None) -> Any:
        kernels = list(dense._POSSIBLE_KERNELS["CUDA"])
        names = [k.__name__ for k in kernels]
        if "HummingLinearKernel" in names and "MarlinLinearKernel" in names:
            kernels.insert(names.index("MarlinLinearKernel"), kernels.pop(names.index("HummingLinearKernel")))
        for k in kernels:
            if k.ok:
                return k
        raise ValueError("Failed to find a kernel that can implement the WNA16 linear layer.")

    dense._POSSIBLE_KERNELS = {"CUDA": [MacheteLinearKernel, MarlinLinearKernel, HummingLinearKernel]}
    dense.choose_mp_linear_kernel = choose_mp_linear_kernel
    gptq = _module(_Q + "auto_gptq", choose_mp_linear_kernel=choose_mp_linear_kernel)
    return choose_mp_linear_kernel, gptq


def _dense_decision(chosen: str) -> _Decision:
    return dataclasses.replace(SEED, paths={**SEED.paths, "dense": _Path(chosen, None, (_Cand(chosen, "chosen"),))})


def test_weight_only_linears_run_the_decided_kernel(fake_vllm: dict[str, Any]) -> None:
    """The 0.34 sweep: GPTQ/AWQ/WNA16 layers on sm90 ran Machete or Humming where the decision is
    Marlin; no wrapper reached vLLM's weight-only kernel choice, which GPTQ imports by name."""
    original, gptq = _install_mp(fake_vllm)
    plugin.set_resolver(lambda values: _dense_decision("marlin"))
    plugin.register()
    assert gptq.choose_mp_linear_kernel(object()) is MarlinLinearKernel
    assert fake_vllm["dense"].choose_mp_linear_kernel(object()) is MarlinLinearKernel
    assert fake_vllm["dense"]._POSSIBLE_KERNELS["CUDA"][0] is MacheteLinearKernel, "the table is restored"
    assert plugin.status()["fallbacks"] == []
    plugin.unpatch()
    assert gptq.choose_mp_linear_kernel is original


def test_weight_only_kernel_vllm_cannot_use_falls_back_to_vllms_own(fake_vllm: dict[str, Any]) -> None:
    _install_mp(fake_vllm)
    plugin.set_resolver(lambda values: _dense_decision("marlin"))
    plugin.register()
    MarlinLinearKernel.ok = False
    try:
        assert fake_vllm["dense"].choose_mp_linear_kernel(object()) is MacheteLinearKernel
    finally:
        MarlinLinearKernel.ok = True
    (fallback,) = plugin.status()["fallbacks"]
    assert fallback == {**fallback, "path": "dense", "decided": "marlin", "used": "MacheteLinearKernel (vLLM's own)"}
