"""Probe run by ``kernelpolicy.engines.vllm.testing`` inside a target vLLM venv (not imported by it).

    python _probe.py REQUEST.json RESULT.json

A request with ``cells`` runs many deployments in one process; one with ``bench`` times the
plugin's cost to a whole model's start-up (:func:`run_bench`).

It loads the stub CUDA driver, lets vLLM resolve the simulated platform, loads vLLM's general
plugins (as ``EngineArgs`` would), builds a real ``VllmConfig`` for the model, then asks vLLM's
own selectors what they choose on each path. Every step's failure is recorded as data in the
result; the script exits 0 whenever it could write the result. Only the standard library and
the target's vLLM/torch are used.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import importlib
import inspect
import json
import logging
import socket
import sys
import tempfile
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

_LOG_MARKERS = ("deepgemm", "deep_gemm", "moe backend", "kernelpolicy", "platform plugin")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"{record.levelname} {record.name}: {record.getMessage()}"
        except Exception:  # a bad format string must not break the probe
            text = f"{record.levelname} {record.name}: {record.msg!r}"
        if record.exc_info and record.levelno >= logging.ERROR:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))[-3000:]
        self.messages.append(text)


def _error(exc: BaseException) -> str:
    tail = traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:]
    return f"{type(exc).__name__}: {exc}\n{''.join(tail)}".strip()


def _step(result: dict[str, Any], name: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:
        result["errors"][name] = _error(exc)
        return None


def _shell(cls: type, **attrs: Any) -> Any:
    """An instance of a subclass of *cls*, built without running any constructor.

    *attrs* become class attributes of the subclass, so they also shadow properties.
    """
    namespace: dict[str, Any] = {"__abstractmethods__": frozenset(), **attrs}
    sub = type(f"_Probe{cls.__name__}", (cls,), namespace)
    return object.__new__(sub)


def _scheme(quant: dict[str, Any]) -> str:
    """``block``, ``channel``, ``tensor`` or ``none`` from an HF ``quantization_config``."""
    if not quant or str(quant.get("quant_method", "")).lower() == "mxfp4":
        return "none"  # gpt-oss (mxfp4): the linear layers stay BF16, only the experts are MXFP4
    if quant.get("weight_block_size"):
        return "block"
    for group in (quant.get("config_groups") or {}).values():
        weights = group.get("weights") or {}
        strategy = str(weights.get("strategy", "")).lower()
        if strategy in ("block", "channel", "tensor"):
            return strategy
    return "tensor"


def _dynamic(quant: dict[str, Any]) -> bool:
    if quant.get("activation_scheme") == "static":
        return False
    if str(quant.get("quant_method", "")).lower() == "modelopt" and "activation_scheme" not in quant:
        return False  # ModelOpt FP8 exports carry static input scales (vLLM: kFp8StaticTensorSym)
    for group in (quant.get("config_groups") or {}).values():
        acts = group.get("input_activations") or {}
        if acts and acts.get("dynamic") is False:
            return False
    return True


def _keys(scheme: str, dynamic: bool) -> tuple[Any, Any]:
    qu = importlib.import_module("vllm.model_executor.layers.quantization.utils.quant_utils")
    if scheme == "block":
        return qu.kFp8Static128BlockSym, qu.kFp8Dynamic128Sym
    if scheme == "channel":
        return qu.kFp8StaticChannelSym, qu.kFp8DynamicTokenSym
    act = qu.kFp8DynamicTensorSym if dynamic else qu.kFp8StaticTensorSym
    return qu.kFp8StaticTensorSym, act


def _first_attr(obj: Any, names: tuple[str, ...], default: Any = None) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stated_parallelism(facts: dict[str, Any]) -> dict[str, Any]:
    """``VllmConfig`` arguments that run the simulated engine as the cell's stated deployment
    (``deploy.tp``, ``deploy.ep``, ``deploy.lora``): the plugin reads them from vLLM's config
    as it is built, and a stated fact the engine's config contradicts is dropped for the
    engine's value. One process, no GPU: the sizes are only read, never used to start workers."""
    from vllm.config import LoRAConfig, ParallelConfig

    out: dict[str, Any] = {}
    parallel: dict[str, Any] = {}
    tp = int(facts.get("deploy.tp") or 1)
    if "deploy.tp" in facts:
        parallel["tensor_parallel_size"] = tp
    ep = int(facts.get("deploy.ep") or 1)
    if ep > 1:  # vLLM shards the experts over every TP x DP rank
        parallel["enable_expert_parallel"] = True
        parallel["data_parallel_size"] = max(1, ep // tp)
    if parallel:
        out["parallel_config"] = ParallelConfig(**parallel)
    if facts.get("deploy.lora"):
        out["lora_config"] = LoRAConfig()
    return out


def _build_config(req: dict[str, Any], result: dict[str, Any], capture: _Capture) -> Any:
    from vllm.config import KernelConfig, ModelConfig, VllmConfig

    serve = req.get("serve") or {}
    model_dir = Path(tempfile.mkdtemp(prefix="kp-model-"))
    (model_dir / "config.json").write_text(json.dumps(req["config"]), encoding="utf-8")
    extra: dict[str, Any] = {}
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    if req.get("model_id") and "served_model_name" in fields:
        extra["served_model_name"] = req["model_id"]  # what `vllm serve ID` shows the plugin
    if "allow_deprecated_quantization" in fields:
        extra["allow_deprecated_quantization"] = True  # fbgemm_fp8 (Llama 4) on 0.33
    if req.get("max_model_len"):
        extra["max_model_len"] = int(req["max_model_len"])  # else vLLM derives it from the config
    if serve.get("enforce_eager"):  # `--enforce-eager`: no CUDA graphs
        extra["enforce_eager"] = True
    model_config = ModelConfig(
        model=str(model_dir),
        skip_tokenizer_init=True,
        dtype=str(serve.get("dtype") or "bfloat16"),
        **extra,
    )
    kernel_kwargs: dict[str, Any] = {}
    attention: dict[str, Any] = {}
    if serve.get("attention_backend"):  # `--attention-backend NAME`, as EngineArgs sets it
        from vllm.config import AttentionConfig

        attention["attention_config"] = AttentionConfig(backend=str(serve["attention_backend"]))
    if serve.get("kv_cache_dtype"):  # `--kv-cache-dtype D`, before vLLM's model code reads it
        from vllm.config import CacheConfig

        attention["cache_config"] = CacheConfig(cache_dtype=str(serve["kv_cache_dtype"]))
    if req.get("moe_backend"):
        kernel_kwargs["moe_backend"] = req["moe_backend"]
    before = len(capture.messages)
    vllm_config = VllmConfig(
        model_config=model_config,
        kernel_config=KernelConfig(**kernel_kwargs),
        **attention,
        **_stated_parallelism(req.get("facts") or {}),
    )
    if serve.get("max_num_batched_tokens"):  # `--max-num-batched-tokens N`, as the plugin reads it
        vllm_config.scheduler_config.max_num_batched_tokens = int(serve["max_num_batched_tokens"])
    warnings = [m for m in capture.messages[before:] if "auto-disabled deepgemm" in m.lower()]
    result["auto_disable_warning"] = warnings[0] if warnings else None
    quant_config = vllm_config.quant_config
    result["quant_config"] = type(quant_config).__name__ if quant_config is not None else None
    result["quant_use_deep_gemm"] = getattr(quant_config, "use_deep_gemm", None)
    text = model_config.hf_text_config
    result["model_type"] = getattr(text, "model_type", None)
    result["quantization"] = model_config.quantization
    return vllm_config


#: In :func:`_linear_shapes`: the shared expert's gate/up projection (the layer a single-deployment
#: probe asks about).
_GATE_UP: Final = 2


def _linear_shapes(text: Any) -> list[tuple[int, int]]:
    """The FP8 linear layers of one decoder layer, as (out, in): attention in and out, and the
    shared expert's gate/up and down projections (block-aligned, as the checkpoints are)."""
    hidden = int(text.hidden_size)
    inter = int(_first_attr(text, ("shared_expert_intermediate_size", "moe_intermediate_size", "intermediate_size")))
    return [(3 * hidden, hidden), (hidden, hidden), (2 * inter, hidden), (hidden, inter)]


def _dense(req: dict[str, Any], result: dict[str, Any], vllm_config: Any) -> Any:
    import torch
    from vllm.platforms import current_platform

    lin = importlib.import_module("vllm.model_executor.kernels.linear")
    quant = dict(req["config"].get("quantization_config") or {})
    scheme = _scheme(quant)
    dense: dict[str, Any] = {"scheme": scheme, "kernel": None, "candidates": []}
    result["dense"] = dense
    if scheme == "none":
        return None
    text = vllm_config.model_config.hf_text_config
    shape = tuple(req.get("dense_shape") or _linear_shapes(text)[_GATE_UP])
    dense["weight_shape"] = list(shape)
    fmt = _dense_format(quant)
    if fmt == "nvfp4":
        return _dense_nvfp4(lin, dense)
    if fmt is not None:
        return _dense_wna16(lin, dense, fmt, shape, vllm_config.model_config.dtype)
    weight_key, act_key = _keys(scheme, _dynamic(quant))
    cfg_cls = importlib.import_module(
        "vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel"
    ).FP8ScaledMMLinearLayerConfig
    layer_cfg = cfg_cls(
        weight_quant_key=weight_key,
        activation_quant_key=act_key,
        input_dtype=torch.bfloat16,
        out_dtype=torch.bfloat16,
        weight_shape=shape,
    )
    table = lin._POSSIBLE_FP8_BLOCK_KERNELS if scheme == "block" else lin._POSSIBLE_FP8_KERNELS
    cap = current_platform.get_device_capability()
    cc = cap[0] * 10 + cap[1] if cap is not None else None
    for kernel in table.get(current_platform._enum, []):
        try:
            ok, reason = lin.is_supported_and_can_implement_kernel(kernel, layer_cfg, cc)
        except Exception as exc:
            ok, reason = False, f"raised {type(exc).__name__}: {exc}"
        dense["candidates"].append({"name": kernel.__name__, "ok": bool(ok), "reason": reason})
    instance = lin.init_fp8_linear_kernel(
        activation_quant_key=act_key,
        weight_quant_key=weight_key,
        input_dtype=torch.bfloat16,
        out_dtype=torch.bfloat16,
        weight_shape=shape,
        module_name="probe.dense",
    )
    dense["kernel"] = type(instance).__name__
    fallback = getattr(instance, "fallback", None)
    dense["fallback"] = type(fallback).__name__ if fallback is not None else None
    return instance


#: A weight-only integer format: (bits, group size, symmetric, zero points), as vLLM's GPTQ,
#: AWQ and compressed-tensors WNA16 methods hand it to ``choose_mp_linear_kernel``.
WNA16 = tuple[int, int, bool, bool]


def _dense_format(quant: dict[str, Any]) -> Any:
    """``"nvfp4"``, a :data:`WNA16` tuple, or ``None`` (an FP8 format: the scaled-mm tables)."""
    method = str(quant.get("quant_method", "")).lower()
    algo = str(quant.get("quant_algo", "") or (quant.get("quantization") or {}).get("quant_algo", "")).upper()
    if "NVFP4" in algo or str(quant.get("format", "")).lower() == "nvfp4-pack-quantized":
        return "nvfp4"
    if method in ("gptq", "gptq_marlin"):
        sym = bool(quant.get("sym", True))
        return (int(quant.get("bits", 4)), int(quant.get("group_size", -1)), sym, False)
    if method in ("awq", "awq_marlin"):
        return (int(quant.get("bits", 4)), int(quant.get("group_size", -1)), False, bool(quant.get("zero_point", True)))
    for group in (quant.get("config_groups") or {}).values():
        weights = group.get("weights") or {}
        if str(weights.get("type", "")).lower() == "int" and not group.get("input_activations"):
            sym = bool(weights.get("symmetric", True))
            size = weights.get("group_size")
            return (int(weights.get("num_bits", 4)), int(size) if size else -1, sym, not sym)
    return None


def _dense_nvfp4(lin: Any, dense: dict[str, Any]) -> Any:
    """vLLM's NVFP4 linear choice (``init_nvfp4_linear_kernel``, W4A4 as ModelOpt checkpoints are)."""
    dense["scheme"] = "nvfp4"
    for kernel in lin._POSSIBLE_NVFP4_KERNELS.get(_platform_enum(), []):
        try:
            ok, reason = kernel.is_supported()
        except Exception as exc:
            ok, reason = False, f"raised {type(exc).__name__}: {exc}"
        dense["candidates"].append({"name": kernel.__name__, "ok": bool(ok), "reason": reason or ""})
    instance = lin.init_nvfp4_linear_kernel()
    dense["kernel"] = type(instance).__name__
    return instance


def _dense_wna16(lin: Any, dense: dict[str, Any], fmt: WNA16, shape: tuple[int, ...], dtype: Any) -> Any:
    """vLLM's weight-only linear choice (``choose_mp_linear_kernel``) for a GPTQ, AWQ or
    compressed-tensors WNA16 layer of *shape* (out, in)."""
    from vllm.scalar_type import scalar_types

    bits, group, sym, zero_points = fmt
    dense["scheme"] = f"w{bits}a16"
    weight_type = getattr(scalar_types, {4: "uint4b8", 8: "uint8b128"}[bits] if sym else f"uint{bits}")
    mp = importlib.import_module("vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel")
    out_dim, in_dim = int(shape[0]), int(shape[1])
    values = {
        "full_weight_shape": (in_dim, out_dim),
        "partition_weight_shape": (in_dim, out_dim),
        "weight_type": weight_type,
        "act_type": dtype,
        "group_size": group,
        "zero_points": zero_points,
        "has_g_idx": False,
    }
    names = {f.name for f in dataclasses.fields(mp.MPLinearLayerConfig)}
    config = mp.MPLinearLayerConfig(**{k: v for k, v in values.items() if k in names})
    for kernel in lin._POSSIBLE_KERNELS.get(_platform_enum(), []):
        try:
            ok, reason = kernel.can_implement(config)
        except Exception as exc:
            ok, reason = False, f"raised {type(exc).__name__}: {exc}"
        dense["candidates"].append({"name": kernel.__name__, "ok": bool(ok), "reason": reason or ""})
    kernel = lin.choose_mp_linear_kernel(config)
    dense["kernel"] = kernel.__name__
    return None


def _platform_enum() -> Any:
    from vllm.platforms import current_platform

    return current_platform._enum


def _moe_config(vllm_config: Any) -> Any:
    import torch

    cfg_mod = importlib.import_module("vllm.model_executor.layers.fused_moe.config")
    act_mod = importlib.import_module("vllm.model_executor.layers.fused_moe.activation")
    text = vllm_config.model_config.hf_text_config
    experts = int(_first_attr(text, ("num_experts", "n_routed_experts", "num_local_experts")))
    top_k = int(_first_attr(text, ("num_experts_per_tok", "moe_topk", "top_k"), 8))
    hidden = int(text.hidden_size)
    inter = int(_first_attr(text, ("moe_intermediate_size", "intermediate_size")))
    act_name = str(getattr(text, "hidden_act", "silu") or "silu").lower()
    if str(getattr(text, "model_type", "")) == "gpt_oss":
        act_name = "swigluoai"  # what vLLM's gpt-oss model passes to its FusedMoE layers
    elif str(getattr(text, "model_type", "")) == "nemotron_h":
        # Nemotron-H's experts are not gated: its model passes activation_without_mul(mlp_hidden_act)
        act_name = str(getattr(text, "mlp_hidden_act", None) or act_name).lower() + "_no_mul"
    activation = next((m for m in act_mod.MoEActivation if m.value == act_name), act_mod.MoEActivation.SILU)
    values: dict[str, Any] = {
        "num_experts": experts,
        "experts_per_token": top_k,
        "hidden_dim": hidden,
        "intermediate_size": inter,
        "num_local_experts": experts,
        "num_logical_experts": experts,
        "activation": activation,
        "device": "cuda",
        "routing_method": cfg_mod.RoutingMethodType.Renormalize,
        "moe_parallel_config": cfg_mod.FusedMoEParallelConfig.make_no_parallel(),
        "in_dtype": torch.bfloat16,
        "router_logits_dtype": torch.float32,
        "moe_backend": vllm_config.kernel_config.moe_backend,
        "has_bias": False,
        "is_lora_enabled": False,
    }
    names = {f.name for f in dataclasses.fields(cfg_mod.FusedMoEConfig)}
    return cfg_mod.FusedMoEConfig(**{k: v for k, v in values.items() if k in names})


_MOE_IMPORTERS = {
    "fp8": ("vllm.model_executor.layers.quantization.fp8", False),
    "compressed-tensors": (
        "vllm.model_executor.layers.quantization.compressed_tensors."
        "compressed_tensors_moe.compressed_tensors_moe_w8a8_fp8",
        True,
    ),
    "modelopt": ("vllm.model_executor.layers.quantization.modelopt", False),
}


def _expert_scheme(config: dict[str, Any], quant: dict[str, Any]) -> str:
    """The routed experts' scheme: ``fp8`` (the FP8 oracle), ``mxfp4``, ``mxfp8`` or ``nvfp4``."""
    method = str(quant.get("quant_method", "")).lower()
    if method == "mxfp4" or str(config.get("expert_dtype", "")).lower() in ("fp4", "mxfp4"):
        return "mxfp4"
    algo = str(quant.get("quant_algo", "") or (quant.get("quantization") or {}).get("quant_algo", "")).upper()
    if "NVFP4" in algo:
        return "nvfp4"
    if "MXFP8" in algo or method == "mxfp8":
        return "mxfp8"
    return "fp8"


#: scheme -> (the module whose by-name copy the quantization method calls, function)
_ORACLE_CALLS = {
    "mxfp4": "vllm.model_executor.layers.quantization.mxfp4",
    "nvfp4": "vllm.model_executor.layers.quantization.modelopt",
    "mxfp8": "vllm.model_executor.layers.quantization.modelopt",
}


def _other_oracle(scheme: str, text: Any, moe: dict[str, Any], moe_config: Any) -> Any:
    module = importlib.import_module(_ORACLE_CALLS[scheme])
    qu = importlib.import_module("vllm.model_executor.layers.quantization.utils.quant_utils")
    kwargs: dict[str, Any] = {}
    if scheme == "mxfp4":
        name = "select_mxfp4_moe_backend"
        if str(getattr(text, "model_type", "")).startswith("deepseek_v4"):
            name = "select_deepseek_v4_mxfp4_moe_backend"  # what Mxfp4MoEMethod calls for DeepSeek-V4
    elif scheme == "nvfp4":
        name = "select_nvfp4_moe_backend"
        kwargs = {"weight_key": qu.kNvfp4Static, "activation_key": qu.kNvfp4Dynamic}
    else:
        name = "select_mxfp8_moe_backend"
    select: Any = getattr(module, name)
    moe["via"] = f"{module.__name__}.{name}"
    backend, experts = select(moe_config, **kwargs)
    moe["backend"] = getattr(backend, "name", str(backend))
    moe["experts"] = experts.__name__ if experts is not None else None
    return experts


def _moe(req: dict[str, Any], result: dict[str, Any], vllm_config: Any) -> Any:
    moe: dict[str, Any] = {"backend": None, "experts": None, "scheme": None}
    result["moe"] = moe
    text = vllm_config.model_config.hf_text_config
    if _first_attr(text, ("num_experts", "n_routed_experts", "num_local_experts")) is None:
        moe["reason"] = "the model has no MoE layers"
        return None
    quant = dict(req["config"].get("quantization_config") or {})
    experts_scheme = _expert_scheme(req["config"], quant)
    moe["scheme"] = experts_scheme
    if experts_scheme != "fp8":
        return _other_oracle(experts_scheme, text, moe, _moe_config(vllm_config))
    scheme = _scheme(quant)
    if scheme == "none":
        moe["reason"] = "the model is not FP8-quantized"
        return None
    module_name, allow_cutlass = _MOE_IMPORTERS.get(
        str(vllm_config.model_config.quantization),
        ("vllm.model_executor.layers.fused_moe.oracle.fp8", False),
    )
    module = importlib.import_module(module_name)
    moe["via"] = module_name
    weight_key, act_key = _keys(scheme, _dynamic(quant))
    backend, experts = module.select_fp8_moe_backend(
        config=_moe_config(vllm_config),
        weight_key=weight_key,
        activation_key=act_key,
        allow_vllm_cutlass=allow_cutlass,
    )
    moe["backend"] = getattr(backend, "name", str(backend))
    moe["experts"] = experts.__name__ if experts is not None else None
    return experts


def _warmup(result: dict[str, Any], vllm_config: Any, kernel: Any, experts: Any) -> None:
    import torch

    from vllm import envs

    warm: dict[str, Any] = {"gate": None, "dense": None, "moe": None}
    result["warmup"] = warm
    kw = importlib.import_module("vllm.model_executor.warmup.kernel_warmup")
    dgw = importlib.import_module("vllm.model_executor.warmup.deep_gemm_warmup")
    gate = bool(envs.VLLM_USE_DEEP_GEMM and kw.is_deep_gemm_supported() and envs.VLLM_DEEP_GEMM_WARMUP != "skip")
    warm["gate"] = gate
    align = list(dgw.get_mk_alignment_for_contiguous_layout())

    def dense_gate() -> bool:
        if kernel is None:
            return False
        n, k = result["dense"]["weight_shape"]
        weight = torch.empty((n, k), dtype=torch.float8_e4m3fn)
        scale = torch.empty((max(n // align[0], 1), max(k // align[1], 1)), dtype=torch.float32)
        if hasattr(dgw, "_fp8_linear_may_use_deep_gemm"):
            fp8 = importlib.import_module("vllm.model_executor.layers.quantization.fp8")
            method_cls = fp8.Fp8LinearMethod
            if vllm_config.model_config.quantization != "fp8":
                method_cls = type("_NotFp8LinearMethod", (), {})
            method = _shell(
                method_cls,
                block_quant=result["dense"]["scheme"] == "block",
                use_marlin=False,
                fp8_linear=kernel,
                quant_config=types.SimpleNamespace(weight_block_size=align),
            )
            module = _shell(dgw.LinearBase, quant_method=method, weight=weight, weight_scale_inv=scale)
            return bool(dgw._fp8_linear_may_use_deep_gemm(module))
        if hasattr(dgw, "_deep_gemm_linear_data"):
            dg_cls = dgw.DeepGemmFp8BlockScaledMMKernel
            provider = kernel if isinstance(kernel, dg_cls) else None
            fallback = getattr(kernel, "fallback", None)
            if provider is None and isinstance(fallback, dg_cls):
                provider = fallback
            module = _shell(
                torch.nn.Module,
                deep_gemm_warmup_provider=provider,
                weight_block_size=align,
                weight=weight,
                weight_scale_inv=scale,
                weight_scale=scale,
            )
            try:
                return dgw._deep_gemm_linear_data(module) is not None
            except Exception:
                # the gate accepted the provider, then read weights the shell lacks
                return provider is not None
        raise RuntimeError("no known dense DeepGEMM warmup gate in this vLLM")

    def moe_gate() -> bool:
        if experts is None:
            return False
        fused = _shell(experts)
        quant_cfg = types.SimpleNamespace(quant_dtype=torch.float8_e4m3fn, block_shape=align)
        method = types.SimpleNamespace(
            get_fused_moe_quant_config=lambda *_a, **_k: quant_cfg,
            moe_quant_config=quant_cfg,
            moe_kernel=types.SimpleNamespace(impl=types.SimpleNamespace(fused_experts=fused), fused_experts=fused),
        )
        runner = _shell(
            dgw.MoERunner,
            _quant_method=method,
            quant_method=method,
            routed_experts=None,
            moe_config=None,
        )
        return bool(dgw._fused_moe_grouped_gemm_may_use_deep_gemm(runner))

    dense_ok = _step(result, "warmup.dense", dense_gate)
    moe_ok = _step(result, "warmup.moe", moe_gate)
    warm["dense"] = None if dense_ok is None else bool(gate and dense_ok)
    warm["moe"] = None if moe_ok is None else bool(gate and moe_ok)


_ROUTER_TIERS = (
    ("allow_ll_bf16_gemm", "ll_bf16"),
    ("allow_dsv3_router_gemm", "dsv3"),
    ("allow_fp32_router_gemm", "fp32_gemv"),
    ("allow_bf16x3_router_gemm", "bf16x3"),
    ("allow_cublas_router_gemm", "cublas"),
)


def _router(req: dict[str, Any], result: dict[str, Any], vllm_config: Any) -> None:
    import torch

    router: dict[str, Any] = {"flags": {}, "backend": None, "cls": None}
    result["router"] = router
    text = vllm_config.model_config.hf_text_config
    experts = _first_attr(text, ("num_experts", "n_routed_experts", "num_local_experts"))
    if experts is None:
        router["reason"] = "the model has no MoE layers"
        return
    dtype_name = str(req.get("router_dtype") or "float32")
    dtype = getattr(torch, dtype_name)
    gl = importlib.import_module("vllm.model_executor.layers.fused_moe.router.gate_linear")
    extra: dict[str, Any] = {}
    if (
        str(getattr(text, "model_type", "")) == "nemotron_h"
        and "force_fp32_compute" in inspect.signature(gl.GateLinear.__init__).parameters
    ):
        extra["force_fp32_compute"] = True  # what vLLM's Nemotron-H model asks of its gate
    gate = gl.GateLinear(
        int(text.hidden_size),
        int(experts),
        bias=False,
        out_dtype=torch.float32,
        params_dtype=dtype,
        prefix="probe.gate",
        **extra,
    )
    router["cls"] = type(gate).__name__
    router["weight_dtype"] = str(gate.weight.dtype).removeprefix("torch.")
    router["flags"] = {
        k: bool(v) for k, v in sorted(vars(gate).items()) if k.startswith("allow_") and k.endswith("_gemm")
    }
    backend = next((bid for flag, bid in _ROUTER_TIERS if router["flags"].get(flag)), None)
    if backend is None:
        backend = "linear_fp32" if gate.weight.dtype == torch.float32 else "linear"
    router["backend"] = backend


def _attention(req: dict[str, Any], result: dict[str, Any], vllm_config: Any) -> None:
    """vLLM's attention choice for the model's decoder layers, as its ``Attention`` and
    ``MLAAttention`` layers ask the selector (``get_attn_backend``, read through the module so
    the plugin's wrapper answers when it is registered): head size, MLA, sinks (gpt-oss), the
    sparse indexer (``index_topk``), a sliding window, and the running KV-cache dtype."""
    selector = importlib.import_module("vllm.v1.attention.selector")
    model_config = vllm_config.model_config
    text = model_config.hf_text_config
    layer_types = [str(t) for t in (getattr(text, "layer_types", None) or ())]
    sliding = getattr(text, "sliding_window", None) is not None or "sliding_attention" in layer_types
    heads = int(getattr(text, "num_attention_heads", 0) or 0)
    tp = int(vllm_config.parallel_config.tensor_parallel_size or 1)
    kwargs: dict[str, Any] = {
        "use_mla": bool(model_config.use_mla),
        "has_sink": str(getattr(text, "model_type", "")) == "gpt_oss",
        "use_sparse": getattr(text, "index_topk", None) is not None,
        "num_heads": max(heads // tp, 1) if heads else None,
        "has_sliding_window": bool(sliding),
    }
    accepted = inspect.signature(selector.get_attn_backend).parameters
    attention: dict[str, Any] = {"backend": None, "cls": None, **{k: v for k, v in kwargs.items() if k != "num_heads"}}
    result["attention"] = attention
    backend = selector.get_attn_backend(
        int(model_config.get_head_size()),
        model_config.dtype,
        str(vllm_config.cache_config.cache_dtype),
        **{k: v for k, v in kwargs.items() if k in accepted},
    )
    attention["cls"] = backend.__name__
    attention["backend"] = str(backend.get_name())
    running = vllm_config.attention_config.backend
    attention["config_backend"] = getattr(running, "name", None) if running is not None else None


def _deep_gemm_info(result: dict[str, Any]) -> None:
    dg = importlib.import_module("vllm.utils.deep_gemm")
    iu = importlib.import_module("vllm.utils.import_utils")
    info: dict[str, Any] = {
        "supported": bool(dg.is_deep_gemm_supported()),
        "has_deep_gemm": bool(iu.has_deep_gemm()),
    }
    import importlib.util as iutil

    for name in ("deep_gemm", "vllm.third_party.deep_gemm"):
        try:
            spec = iutil.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations)))
            info["package"] = name
            info["sm120_marker"] = (root / "include/deep_gemm/impls/sm120_fp8_fp4_gemm_1d1d.cuh").is_file()
            break
    result["deep_gemm"] = info


def _plugin_state(result: dict[str, Any]) -> None:
    mod = sys.modules.get("kernelpolicy.engines.vllm.plugin")
    if mod is None:
        result["plugin"] = None
        return
    status = getattr(mod, "status", None)
    result["plugin"] = status() if callable(status) else {"loaded": True}


def _inspect_in_process() -> None:
    """Let vLLM inspect model classes in this process, not in a fresh interpreter per class.

    vLLM imports each architecture's module in a subprocess so that CUDA is not initialised in
    the server; there is no CUDA here, and a subprocess re-imports vLLM (tens of seconds).
    """
    registry = importlib.import_module("vllm.model_executor.models.registry")
    if callable(getattr(registry, "_run_in_subprocess", None)):
        setattr(registry, "_run_in_subprocess", lambda fn: fn())  # noqa: B010


def _setup(req: dict[str, Any], result: dict[str, Any], capture: _Capture) -> None:
    """Once per process: the stub driver, vLLM, its general plugins, in-process inspection."""
    ctypes.CDLL(req["libcuda"], mode=ctypes.RTLD_GLOBAL)
    import vllm

    # vLLM configures its loggers when imported; attach afterwards
    for name in ("vllm", "kernelpolicy"):
        logging.getLogger(name).addHandler(capture)
    result["vllm_version"] = vllm.__version__
    from vllm.platforms import current_platform

    result["platform"] = type(current_platform).__name__
    cap = current_platform.get_device_capability()
    result["device_capability"] = [cap[0], cap[1]] if cap is not None else None
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    _inspect_in_process()


_DISTRIBUTED: list[bool] = []


def _init_distributed() -> None:
    """A one-rank gloo process group on 127.0.0.1 (vLLM's layers ask for their parallel groups)."""
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    init_distributed_environment(
        world_size=1,
        rank=0,
        distributed_init_method=f"tcp://127.0.0.1:{_free_port()}",
        local_rank=0,
        backend="gloo",
    )
    initialize_model_parallel(1, 1)


def _select(req: dict[str, Any], result: dict[str, Any], capture: _Capture) -> None:
    """One deployment: build its VllmConfig, then ask each selector what it picks."""
    vllm_config = _build_config(req, result, capture)
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(vllm_config):
        if not _DISTRIBUTED:
            _DISTRIBUTED.append(True)
            _step(result, "distributed", _init_distributed)
        kernel = _step(result, "dense", lambda: _dense(req, result, vllm_config))
        experts = _step(result, "moe", lambda: _moe(req, result, vllm_config))
        _step(result, "warmup", lambda: _warmup(result, vllm_config, kernel, experts))
        _step(result, "router", lambda: _router(req, result, vllm_config))
        _step(result, "attention", lambda: _attention(req, result, vllm_config))
        _step(result, "deep_gemm", lambda: _deep_gemm_info(result))
        _step(result, "plugin", lambda: _plugin_state(result))


def _log_lines(capture: _Capture, since: int = 0) -> list[str]:
    return [m for m in capture.messages[since:] if m.startswith("ERROR") or any(s in m.lower() for s in _LOG_MARKERS)]


def run(req: dict[str, Any], result: dict[str, Any]) -> None:
    capture = _Capture()
    try:
        _setup(req, result, capture)
        _select(req, result, capture)
    finally:
        result["log_lines"] = _log_lines(capture)


# ----------------------------------------------------------------------------- many deployments


def _clear_caches(packages: tuple[str, ...] = ("vllm",)) -> None:
    """Forget what *packages* memoised about the last deployment (env, GPU): every ``cache_clear``."""
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in packages or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper):  # functools.cache and lru_cache
                with contextlib.suppress(Exception):  # one that cannot be cleared keeps its value
                    value.cache_clear()


def _set_gpu(cc: list[int], name: str | None) -> None:
    import os

    platform: Any = sys.modules.get("kp_simgpu_platform")
    os.environ["KP_SIMGPU_CC"] = f"{cc[0]}.{cc[1]}"
    if name:
        os.environ["KP_SIMGPU_NAME"] = name
    if platform is not None:
        platform._MAJOR, platform._MINOR = int(cc[0]), int(cc[1])
        platform._NAME = name or "NVIDIA Simulated GPU"


def _plugin(on: bool) -> None:
    """Register kernelpolicy's plugin afresh (its state reset), or take it out."""
    mod = importlib.import_module("kernelpolicy.engines.vllm.plugin")
    mod.unpatch()
    if on:
        mod.register()


def run_cells(req: dict[str, Any], result: dict[str, Any]) -> None:
    """Every deployment of ``req["cells"]`` in this one process (vLLM imported once).

    Each cell gives ``config``, ``gpu`` ([major, minor]), and optionally ``gpu_name``, ``env``,
    ``moe_backend``, ``router_dtype``, ``plugin``; its result has the keys of :func:`run`'s.
    """
    import os

    capture = _Capture()
    result["cells"] = []
    try:
        _setup(req, result, capture)
    except Exception as exc:
        result["errors"]["probe"] = _error(exc)
        result["log_lines"] = _log_lines(capture)
        return
    base_env = dict(os.environ)
    for cell in req["cells"]:
        out: dict[str, Any] = {"errors": {}, "vllm_version": result["vllm_version"], "platform": result["platform"]}
        result["cells"].append(out)
        since = len(capture.messages)
        os.environ.clear()
        os.environ.update(base_env)
        os.environ.update({str(k): str(v) for k, v in (cell.get("env") or {}).items()})
        if cell.get("facts"):
            os.environ["KERNELPOLICY_FACTS"] = json.dumps(cell["facts"])
        else:
            os.environ.pop("KERNELPOLICY_FACTS", None)
        try:
            _set_gpu(cell["gpu"], cell.get("gpu_name"))
            _clear_caches()
            _plugin(bool(cell.get("plugin")))
            _select({**req, **cell}, out, capture)
        except Exception as exc:
            out["errors"]["probe"] = _error(exc)
        finally:
            out["log_lines"] = _log_lines(capture, since)
    _plugin(False)


# ----------------------------------------------------------------------------- flag parity


def _engine_parser() -> Any:
    """vLLM's own argument parser of a serve line's engine flags (``EngineArgs``'), as
    ``vllm serve`` builds it."""
    from vllm.engine.arg_utils import EngineArgs

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older releases
        from vllm.utils import FlexibleArgumentParser
    return EngineArgs.add_cli_args(FlexibleArgumentParser())


def _engine_config(argv: list[str]) -> Any:
    """vLLM's own reading of a serve line's flags: its argument parser, ``EngineArgs`` and the
    ``VllmConfig`` it creates (as ``vllm serve`` does before it starts the engine)."""
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs.from_cli_args(_engine_parser().parse_args(argv))
    return args.create_engine_config()


def _parser_options() -> dict[str, str]:
    """Every option string of vLLM's serve-line parser -> its ``dest`` (what an abbreviation is
    read against: the parser keeps argparse's default ``allow_abbrev``)."""
    parser = _engine_parser()
    return {option: action.dest for option, action in sorted(parser._option_string_actions.items())}


def run_parity(req: dict[str, Any], result: dict[str, Any]) -> None:
    """For each cell of ``req["parity"]`` (``argv``: the serve line's flags, with ``--model``),
    the facts the kernelpolicy plugin gathers from the ``VllmConfig`` vLLM builds from them, put
    through the one fact pipeline (no process environment, as ``explain --no-env``), and the
    decision's fingerprint."""
    capture = _Capture()
    result["cells"] = []
    try:
        _setup(req, result, capture)
        _set_gpu(req["gpu"], req.get("gpu_name"))
        from vllm.platforms import current_platform

        # a serve line's parallel sizes need that many GPUs in vLLM's config checks: the
        # simulated node has eight
        type(current_platform).device_count = classmethod(lambda cls: 8)
    except Exception as exc:
        result["errors"]["probe"] = _error(exc)
        result["log_lines"] = _log_lines(capture)
        return
    if req.get("options"):
        try:
            result["options"] = _parser_options()
        except Exception as exc:
            result["errors"]["options"] = _error(exc)
    kp = importlib.import_module("kernelpolicy")
    gathering = importlib.import_module("kernelpolicy.engines.vllm._facts")
    gather = gathering.facts_from_vllm
    built = importlib.import_module("kernelpolicy.deployment.pipeline").engine_built  # as the plugin builds them
    policy = kp.load_policy()
    for cell in req["parity"]:
        out: dict[str, Any] = {"errors": {}, "argv": cell["argv"]}
        result["cells"].append(out)
        since = len(capture.messages)
        try:
            _clear_caches()
            config = _engine_config(list(cell["argv"]))
            values = gather(config, policy.models)
            facts = built(policy, values, "vllm", None).facts
            decision = kp.resolve(facts, policy)
            out["facts"] = dict(decision.facts.to_json_dict())  # implications applied, as explain prints them
            out["fingerprint"] = decision.fingerprint
            # what the plugin read from this machine rather than from the config (for explain's --fact)
            machine = dict(gathering.package_facts())
            if "host.machine" in values:
                machine["host.machine"] = values["host.machine"]
            out["machine"] = machine
        except BaseException as exc:
            out["errors"]["probe"] = _error(exc)
            out["log_lines"] = _log_lines(capture, since)[-20:]


# ----------------------------------------------------------------------------- the plugin's cost


class _Calls:
    """Counts calls into the functions defined under *root* (a package's folder), by function."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.calls: dict[str, int] = {}

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(self.root):
            module = frame.f_globals.get("__name__", "?")
            name = f"{module}.{frame.f_code.co_qualname}"
            self.calls[name] = self.calls.get(name, 0) + 1

    def __enter__(self) -> _Calls:
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)


def _model_start(req: dict[str, Any], capture: _Capture, layers: int) -> dict[str, Any]:
    """What vLLM selects while it builds one model: its ``VllmConfig``, then for each of *layers*
    decoder layers the FP8 linear kernels, the MoE backend, the router gate and the DeepGEMM
    warmup gates (as vLLM's warmup asks them per module). Returns the objects the forward pass
    calls, of the last layer: ``kernels``, ``experts`` and ``gate``."""
    import torch
    from vllm.config import set_current_vllm_config

    scratch: dict[str, Any] = {"errors": {}}
    vllm_config = _build_config(req, scratch, capture)
    lin = importlib.import_module("vllm.model_executor.kernels.linear")
    gl = importlib.import_module("vllm.model_executor.layers.fused_moe.router.gate_linear")
    text = vllm_config.model_config.hf_text_config
    quant = dict(req["config"].get("quantization_config") or {})
    weight_key, act_key = _keys(_scheme(quant), _dynamic(quant))
    shapes = _linear_shapes(text)
    experts_n = int(_first_attr(text, ("num_experts", "n_routed_experts", "num_local_experts")))
    built: dict[str, Any] = {}
    with set_current_vllm_config(vllm_config):
        for layer in range(layers):
            kernels = [
                lin.init_fp8_linear_kernel(
                    activation_quant_key=act_key,
                    weight_quant_key=weight_key,
                    input_dtype=torch.bfloat16,
                    out_dtype=torch.bfloat16,
                    weight_shape=shape,
                    module_name=f"model.layers.{layer}.linear{i}",
                )
                for i, shape in enumerate(shapes)
            ]
            scratch["dense"] = {"weight_shape": list(shapes[0]), "scheme": _scheme(quant)}
            experts = _moe(req, scratch, vllm_config)
            gate = gl.GateLinear(
                int(text.hidden_size),
                experts_n,
                bias=False,
                out_dtype=torch.float32,
                prefix=f"model.layers.{layer}.gate",
            )
            _warmup(scratch, vllm_config, kernels[0], experts)
            built = {"kernels": kernels, "experts": experts, "gate": gate}
    if scratch["errors"]:
        raise RuntimeError(f"the model's start-up failed: {scratch['errors']}")
    return built


def _reaches(obj: Any, root: str) -> list[str]:
    """Functions of *obj*'s class (and its bases) defined under *root*, or wrapped by kernelpolicy:
    the ways a call on *obj* could enter kernelpolicy."""
    cls = obj if isinstance(obj, type) else type(obj)
    found = []
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            fn = getattr(value, "__func__", value)
            code = getattr(fn, "__code__", None)
            ours = code is not None and code.co_filename.startswith(root)
            if ours or getattr(fn, "__kernelpolicy_wrapped__", False):
                found.append(f"{klass.__qualname__}.{name}")
    return found


def _forward_step(built: dict[str, Any], layers: int, tokens: int) -> dict[str, Any]:
    """One decode step of the model's routers: every layer's ``GateLinear`` forward on CPU (the
    dense and MoE kernels launch CUDA work that cannot run on the simulated GPU)."""
    import torch

    gate = built["gate"]
    x = torch.randn(tokens, gate.weight.shape[1], dtype=gate.weight.dtype)
    shapes = set()
    for _ in range(layers):
        out = gate(x)
        logits = out[0] if isinstance(out, tuple) else out
        shapes.add(tuple(logits.shape))
    return {"router_forwards": layers, "logits_shapes": sorted(list(s) for s in shapes)}


def _per_point(req: dict[str, Any], capture: _Capture, n: int = 2000) -> float:
    """Seconds one selection point spends in the plugin once the decision is made (the median
    of a few batches of *n* asks for the current decision)."""
    import statistics
    import time

    from vllm.config import set_current_vllm_config

    ask = importlib.import_module("kernelpolicy.engines.vllm.plugin").current_decision
    with set_current_vllm_config(_build_config(req, {"errors": {}}, capture)):
        ask()
        batches = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                ask()
            batches.append((time.perf_counter() - t0) / n)
    return statistics.median(batches)


def run_bench(req: dict[str, Any], result: dict[str, Any]) -> None:
    """Time one model's start-up (``VllmConfig`` and every layer's kernel selection) without and
    with kernelpolicy's plugin, alternating; then count calls into kernelpolicy while the
    plugin decides and during a simulated forward step.

    ``req["bench"]``: ``layers``, ``rounds`` and ``tokens`` (of the step). Each timed round
    starts from cleared memoised answers (vLLM's and kernelpolicy's ``lru_cache``s, the plugin
    registered afresh), so every plugin round pays for gathering facts and deciding.
    """
    import time

    bench = req["bench"]
    layers, rounds = int(bench["layers"]), int(bench["rounds"])
    capture = _Capture()
    started = time.perf_counter()
    _setup(req, result, capture)
    result["setup_s"] = time.perf_counter() - started  # the stub driver, vLLM and its platform
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(_build_config(req, {"errors": {}}, capture)):
        _init_distributed()
    started = time.perf_counter()
    _plugin(False)  # imports kernelpolicy's plugin and what it imports at registration
    import kernelpolicy  # noqa: F401  (the core the plugin imports at its first decision)

    result["import_s"] = time.perf_counter() - started
    resolver = importlib.import_module("kernelpolicy.resolver")
    root = str(Path(importlib.import_module("kernelpolicy").__file__ or "").parent)
    times: dict[str, list[float]] = {"off": [], "on": []}
    _model_start(req, capture, 1)  # vLLM's own first-use imports, outside the timings

    def fresh(plugin: bool) -> None:  # as a new process: nothing memoised, the plugin registered anew
        _clear_caches(("vllm", "kernelpolicy"))
        resolver._cache.clear()
        _plugin(plugin)

    for r in range(rounds):
        for on in (False, True) if r % 2 == 0 else (True, False):
            fresh(on)
            t0 = time.perf_counter()
            _model_start(req, capture, layers)
            times["on" if on else "off"].append(time.perf_counter() - t0)
    result["times"] = times
    fresh(True)
    with _Calls(root) as start_calls:
        built = _model_start(req, capture, layers)
    result["startup_calls"] = start_calls.calls
    result["per_point_s"] = _per_point(req, capture)
    result["patched"] = list(importlib.import_module("kernelpolicy.engines.vllm.plugin").status()["patched"])
    with _Calls(root) as step_calls:
        result["step"] = _forward_step(built, layers, int(bench.get("tokens", 8)))
    result["step_calls"] = step_calls.calls
    objects = {f"linear kernel {type(k).__name__}": k for k in built["kernels"]}
    if built["experts"] is not None:
        objects[f"MoE experts {built['experts'].__name__}"] = built["experts"]
    objects["router GateLinear"] = built["gate"]
    result["reaches"] = {name: _reaches(obj, root) for name, obj in objects.items()}
    _plugin(False)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: _probe.py REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    req = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    result: dict[str, Any] = {"errors": {}}
    try:
        (run_bench if "bench" in req else run_parity if "parity" in req else run_cells if "cells" in req else run)(
            req, result
        )
    except BaseException as exc:
        result["errors"]["probe"] = _error(exc)
    Path(argv[2]).write_text(json.dumps(result, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
