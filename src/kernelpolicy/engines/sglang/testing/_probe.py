"""Run SGLang's own kernel selection for many deployments on one simulated GPU.

A standalone script, run with the python of an SGLang venv:
``python _probe.py request.json result.json``. It does not import kernelpolicy (the plugin,
when a cell asks for it, is loaded by SGLang's own ``load_plugins`` from the
``sglang.srt.plugins`` entry point the harness put on ``PYTHONPATH``).

The GPU: ``torch.cuda`` answers with the capability and name in ``KP_SIMGPU_CC`` and
``KP_SIMGPU_NAME`` (a stub ``libcuda.so.1`` on ``LD_LIBRARY_PATH`` lets SGLang's compiled
extensions load). Per cell, what the main process and a scheduler would do:

1. ``ServerArgs(...)`` and ``resolve_once()`` (model overrides; the plugin's resolution hook);
2. publish the record for a scheduler, re-read SGLang's DeepGEMM switch from the environment
   (a scheduler process imports it afresh: the plugin may have set it in the main process);
3. ``Scheduler.init_moe_gemm_config`` (the plugin's scheduler hook wraps it);
4. the quant method of one linear layer (the GEMM it will call: the block-FP8 function it
   dispatched, or what its per-call path picks, named by ``kp_linears.py``) and of one
   MoE layer (the runner ``create_moe_runner`` chose, with the routing method the model's
   module declares; on 0.5.23 the backend its ``apply`` runs), as the model loader asks for them;
5. for a model of SGLang's DeepSeek-V2/V3 module (its ``EntryClass``), the router tier its
   gate computes when built: ``tiny_router_gemm_max_tokens`` as that module calls it (0.5.20+,
   where the plugin's hook wraps it; earlier releases decide inside the gate's forward pass).

Each step's error is recorded for that cell; the next cell starts clean.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: The process environment once SGLang is imported (it sets a few variables of its own then);
#: each cell starts from it, plus the cell's own variables.
_BASE_ENV: dict[str, str] = dict(os.environ)


def _simulate_gpu() -> None:
    import torch

    major, minor = (int(x) for x in os.environ["KP_SIMGPU_CC"].split("."))
    name = os.environ.get("KP_SIMGPU_NAME", "NVIDIA GPU")

    class _Props:
        def __init__(self) -> None:
            self.name = name
            self.major = major
            self.minor = minor
            self.total_memory = 80 << 30
            self.multi_processor_count = 132
            self.L2_cache_size = 50 << 20

    cuda: Any = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.get_device_capability = lambda device=None: (major, minor)
    cuda.get_device_name = lambda device=None: name
    cuda.get_device_properties = lambda device=None: _Props()
    cuda.mem_get_info = lambda device=None: (80 << 30, 80 << 30)
    cuda.set_device = lambda device: None


def _error() -> str:
    lines = traceback.format_exc().strip().splitlines()
    return "\n".join([*lines[-1:], *lines[-3:-1]])


def _set_env(env: dict[str, str]) -> None:
    for key in list(os.environ):
        if key not in _BASE_ENV:
            del os.environ[key]
    os.environ.update(_BASE_ENV)
    os.environ.update(env)


def _refresh_fp8_switch() -> None:
    """What a scheduler process imports: ``USE_TRITON_W8A8_FP8_KERNEL`` read from the environment
    now (``fp8_utils`` copies it into a module constant at import)."""
    from sglang.srt.layers.quantization import fp8_utils

    value = os.environ.get("USE_TRITON_W8A8_FP8_KERNEL", "false").strip().lower() in ("1", "true")
    setattr(fp8_utils, "use_triton_w8a8_fp8_kernel", value)  # noqa: B010 (a module's constant)


def _refresh_deep_gemm_switch() -> bool:
    """What a scheduler process imports: DeepGEMM's switch read from the environment now."""
    from sglang.srt.layers.deep_gemm_wrapper import configurer

    enabled = bool(configurer._compute_enable_deep_gemm())
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("sglang.") and isinstance(
            getattr(module, "ENABLE_JIT_DEEPGEMM", None), bool
        ):
            setattr(module, "ENABLE_JIT_DEEPGEMM", enabled)  # noqa: B010 (a module's constant)
    return enabled


def _server_args(cell: dict[str, Any]) -> Any:
    from sglang.srt.server_args import ServerArgs

    args = {"model_path": cell["model_dir"], "skip_tokenizer_init": True, **cell.get("args", {})}
    if cell.get("model_id"):
        args["served_model_name"] = cell["model_id"]
    server_args = ServerArgs(**args)
    if hasattr(server_args, "resolve_once"):  # 0.5.23: resolution is a step of its own
        server_args.resolve_once()
    return server_args


def _publish(server_args: Any) -> None:
    try:
        from sglang.srt.runtime_context import publish
    except ImportError:  # 0.5.12.post1
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(server_args)
        return
    publish(server_args, role="scheduler")


def _model_config(server_args: Any) -> Any:
    try:
        from sglang.srt.arg_groups.model_override_base import model_config_of

        return model_config_of(server_args)
    except ImportError:  # 0.5.12.post1
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(server_args)


class _SchedulerView:
    """What ``Scheduler.init_moe_gemm_config`` reads of a scheduler."""

    def __init__(self, server_args: Any, model_config: Any) -> None:
        self.server_args = server_args
        self.model_config = model_config


def _quant_config(model_config: Any, raw: dict[str, Any]) -> Any:
    from sglang.srt.layers.quantization import get_quantization_config

    quant = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if not quant:
        return None
    method = getattr(model_config, "quantization", None) or quant.get("quant_method")
    config = get_quantization_config(str(method)).from_config(quant)
    if getattr(config, "packed_modules_mapping", {}) is None:  # the model class sets it on load
        config.packed_modules_mapping = {}
    return config


def _name(value: Any) -> str | None:
    inner = getattr(value, "func", value)
    return getattr(inner, "__name__", None) or (type(value).__name__ if value is not None else None)


def _dense(quant: Any, hf_text: Any) -> dict[str, Any]:
    """The quant method of a linear layer and the GEMM it will call, named by kernelpolicy's
    ``releases/sglang/_linears.py`` (copied beside this script as ``kp_linears.py``: the same
    code the plugin's layer hook runs, evaluating SGLang's own conditions)."""
    import torch
    from kp_linears import linear_kernel  # type: ignore[import-not-found]  # copied beside this script
    from sglang.srt.layers.linear import LinearBase

    layer = LinearBase.__new__(LinearBase)
    torch.nn.Module.__init__(layer)
    size = int(getattr(hf_text, "hidden_size", 4096) or 4096)  # a square down_proj of the model's width
    for name in ("input_size", "input_size_per_partition", "output_size", "output_size_per_partition"):
        setattr(layer, name, size)
    layer.output_partition_sizes = [size]
    layer.params_dtype = torch.bfloat16
    method = quant.get_quant_method(layer, prefix="model.layers.0.mlp.down_proj")
    out: dict[str, Any] = {"method": type(method).__name__}
    function = linear_kernel(method, layer)
    if function is not None:
        out["function"] = function
    return out


_ROUTING_RE = re.compile(r"routing_method_type\s*=\s*RoutingMethodType\.(\w+)")
_ENTRY_RE = re.compile(r"^EntryClass\s*=\s*(\[[^\]]*\]|\w+)", re.M)


@functools.cache
def _model_sources() -> dict[str, str]:
    """Architecture -> the source of the SGLang model module whose ``EntryClass`` names it
    (read as text: importing every model module would take a minute per probe)."""
    from sglang.srt import models

    out: dict[str, str] = {}
    for path in sorted(Path(next(iter(models.__path__))).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        entry = _ENTRY_RE.search(text)
        for name in re.findall(r"\w+", entry.group(1)) if entry else ():
            out.setdefault(name, text)
    return out


def _declared_routing(raw: dict[str, Any]) -> Any:
    """The routing method the model's SGLang module declares for its experts, when it names
    exactly one (``routing_method_type=RoutingMethodType.X``); else None, as a layer that
    declares none gets."""
    from sglang.srt.layers.moe.utils import RoutingMethodType

    arch = ((raw.get("architectures") or [None])[0]) or ""
    names = set(_ROUTING_RE.findall(_model_sources().get(arch, "")))
    return getattr(RoutingMethodType, names.pop(), None) if len(names) == 1 else None


def _moe(quant: Any, hf_text: Any, raw: dict[str, Any]) -> dict[str, Any]:
    import torch
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE
    from sglang.srt.layers.moe.moe_runner import MoeRunnerConfig

    layer = FusedMoE.__new__(FusedMoE)
    torch.nn.Module.__init__(layer)
    method = quant.get_quant_method(layer, prefix="model.layers.1.mlp.experts")
    out: dict[str, Any] = {"method": type(method).__name__}
    experts = next(
        (
            getattr(hf_text, a)
            for a in ("num_experts", "n_routed_experts", "num_local_experts")
            if getattr(hf_text, a, None)
        ),
        8,
    )
    top_k = next((getattr(hf_text, a) for a in ("num_experts_per_tok", "moe_topk") if getattr(hf_text, a, None)), 2)
    config = MoeRunnerConfig(
        num_experts=int(experts),
        num_local_experts=int(experts),
        hidden_size=int(getattr(hf_text, "hidden_size", 4096)),
        intermediate_size_per_partition=int(getattr(hf_text, "moe_intermediate_size", 1024) or 1024),
        layer_id=1,
        top_k=int(top_k),
        params_dtype=torch.bfloat16,
        routing_method_type=_declared_routing(raw),
    )
    create = getattr(method, "create_moe_runner", None)
    if create is None:
        return out
    create(layer, config)
    contract = getattr(method, "get_moe_runner_backend", None)  # 0.5.23: what apply() runs
    runner = getattr(method, "runner", None)
    backend = (
        contract(layer)
        if callable(contract)
        else getattr(runner, "runner_backend", None) or getattr(method, "_moe_runner_backend", None)
    )
    out["runner"] = str(getattr(backend, "value", backend)) if backend is not None else None
    return out


def _router(raw: dict[str, Any], hf_text: Any) -> dict[str, Any] | None:
    """The DeepSeek-family gate's router tier, as ``MoEGate.__init__`` computes it (else None)."""
    import importlib

    import torch

    module = importlib.import_module("sglang.srt.models.deepseek_v2")
    arch = ((raw.get("architectures") or [None])[0]) or ""
    tier = getattr(module, "tiny_router_gemm_max_tokens", None)
    if tier is None or arch not in {getattr(c, "__name__", "") for c in getattr(module, "EntryClass", ())}:
        return None
    rows = int(
        tier(
            num_experts=int(hf_text.n_routed_experts),
            hidden_size=int(hf_text.hidden_size),
            weight_dtype=torch.bfloat16,
        )
    )
    return {"rows": rows, "tier": "tiny_gemm" if rows > 0 else "cublas"}


def _plugin_status() -> dict[str, Any] | None:
    module = sys.modules.get("kernelpolicy.engines.sglang.plugin")
    status: dict[str, Any] | None = module.status() if module is not None else None
    return status


def _one(cell: dict[str, Any], plugin: bool) -> dict[str, Any]:
    started = time.monotonic()
    result: dict[str, Any] = {"errors": {}}
    _set_env(dict(cell.get("env", {})))
    if plugin:
        import kernelpolicy.engines.sglang.plugin as kp_sglang

        kp_sglang._begin_deployment()
    try:
        server_args = _server_args(cell)
    except BaseException:
        result["errors"]["resolution"] = _error()
        return result
    try:
        from sglang.srt.arg_groups.overrides import resolution_result
    except ImportError:  # 0.5.12.post1: resolution writes the fields

        def resolution_result(record: Any, name: str) -> Any:
            return getattr(record, name, None)

    result["args"] = {
        f: str(resolution_result(server_args, f))
        for f in (
            "fp8_gemm_runner_backend",
            "fp4_gemm_runner_backend",
            "moe_runner_backend",
            "moe_a2a_backend",
            # issue #39: the attention backend SGLang resolved, and its per-phase ones
            "attention_backend",
            "prefill_attention_backend",
            "decode_attention_backend",
        )
    }
    try:
        _publish(server_args)
        result["deep_gemm"] = _refresh_deep_gemm_switch()
        _refresh_fp8_switch()
        model_config = _model_config(server_args)
        from sglang.srt.managers.scheduler import Scheduler

        Scheduler.init_moe_gemm_config(_SchedulerView(server_args, model_config))
    except BaseException:
        result["errors"]["scheduler"] = _error()
        result["plugin"] = _plugin_status()
        return result
    try:
        quant = _quant_config(model_config, cell["config"])
    except BaseException:
        result["errors"]["quantization"] = _error()
        quant = None
    if quant is not None:
        try:
            result["dense"] = _dense(quant, model_config.hf_text_config)
        except BaseException:
            result["errors"]["dense"] = _error()
        if cell.get("moe"):
            try:
                result["moe"] = _moe(quant, model_config.hf_text_config, cell["config"])
            except BaseException:
                result["errors"]["moe"] = _error()
    if cell.get("moe"):
        try:
            result["router"] = _router(cell["config"], model_config.hf_text_config)
        except BaseException:
            result["errors"]["router"] = _error()
    result["plugin"] = _plugin_status()
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def _parity(request: dict[str, Any], out: dict[str, Any]) -> None:
    """For each ``argv`` of ``request["parity"]``: SGLang's own reading of the launch line's flags
    (its argument parser and ``ServerArgs``), then the kernelpolicy plugin's fact gathering and the
    one fact pipeline (no process environment, as ``explain --no-env``), and the fingerprint."""
    import importlib

    from sglang.srt.server_args import prepare_server_args

    kp = importlib.import_module("kernelpolicy")
    gathering = importlib.import_module("kernelpolicy.engines.sglang._facts")
    built = importlib.import_module("kernelpolicy.deployment.pipeline").engine_built  # as the plugin builds them
    policy = kp.load_policy()
    for argv in request["parity"]:
        cell: dict[str, Any] = {"argv": argv, "errors": {}}
        out["cells"].append(cell)
        try:
            server_args = prepare_server_args(list(argv))
            if hasattr(server_args, "resolve_once"):
                server_args.resolve_once()
            gpu = gathering.gpu_facts()
            values = {
                **gathering.facts_from_sglang(server_args, policy.engines["sglang"], policy.models, gpu=gpu),
                "deploy.engine": "sglang",  # as the plugin adds it
            }
            facts = built(policy, values, "sglang", None).facts
            decision = kp.resolve(facts, policy)
            cell["facts"] = dict(decision.facts.to_json_dict())
            cell["fingerprint"] = decision.fingerprint
            machine = dict(gathering.package_facts())
            if "host.machine" in values:
                machine["host.machine"] = values["host.machine"]
            cell["machine"] = machine
        except BaseException:
            cell["errors"]["probe"] = _error()


def _launch_options() -> dict[str, str]:
    """Every option string of SGLang's launch parser -> its dest, built as ``prepare_server_args``
    builds it."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return {s: a.dest for s, a in sorted(parser._option_string_actions.items())}


def main(request_file: str, result_file: str) -> int:
    with open(request_file, encoding="utf-8") as fh:
        request = json.load(fh)
    out: dict[str, Any] = {"cells": [], "errors": {}}
    try:
        _simulate_gpu()
        import sglang

        out["sglang"] = getattr(sglang, "__version__", None)
        from sglang.srt.server_args import ServerArgs  # noqa: F401 (its import sets SGLang's env)

        if request.get("plugin"):
            from sglang.srt.plugins import load_plugins

            load_plugins()
    except BaseException:
        out["errors"]["probe"] = _error()
    _BASE_ENV.clear()
    _BASE_ENV.update(os.environ)
    if not out["errors"] and request.get("options"):
        try:
            out["options"] = _launch_options()
        except BaseException:
            out["errors"]["options"] = _error()
    if not out["errors"] and "parity" in request:
        _parity(request, out)
    elif not out["errors"]:
        for cell in request["cells"]:
            out["cells"].append(_one(cell, bool(request.get("plugin"))))
    with open(result_file, "w", encoding="utf-8") as fh:
        json.dump(out, fh, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
