"""kernelpolicy's SGLang plugin: one decision, applied through SGLang's own plugin system.

Registered as ``sglang.srt.plugins: kernelpolicy = kernelpolicy.engines.sglang.plugin:register`` and
allow-listed with ``SGLANG_PLUGINS=kernelpolicy`` (SGLang's ``load_plugins`` runs it in the
main process, in every scheduler process, the detokenizer and the DP controller). It
registers hooks with SGLang's ``HookRegistry`` (and, on 0.5.23, its resolution-hook registry);
SGLang applies them. What each hook does:

- main process, resolution (0.5.23: a resolution hook on ``handle_model_specific_adjustments``;
  0.5.12.post1: around ``ServerArgs._handle_model_specific_adjustments``): resolves one
  decision from the server args, GPU, environment and packages through the one fact pipeline,
  then sets the SGLang flags that reproduce it (:func:`kernelpolicy.engines.engine_flags`, the
  same settings ``kernelpolicy explain`` prints) on every flag the operator left at ``auto``
  (the attention backend, issue #39: when the operator set none of ``--attention-backend`` and
  its per-phase forms; an operator's backend that is not the decided one stands and is a
  recorded conflict),
  and sets ``SGLANG_ENABLE_JIT_DEEPGEMM=0`` before the schedulers start when no path runs
  DeepGEMM;
- scheduler, around ``Scheduler.init_moe_gemm_config``: resolves the decision of this rank,
  runs the multi-rank fingerprint agreement over ``torch.distributed`` (SGLang's world group),
  and after SGLang's own step checks the flags it resolved against the decision;
- scheduler, after ``Fp8Config.get_quant_method`` (from 0.5.23 also the compressed-tensors,
  ModelOpt FP8/FP4, GPTQ-Marlin and AWQ-Marlin configs' ``get_quant_method``): names the GEMM
  each linear layer will call, evaluating what SGLang's own code tests for it (the dispatched
  block-FP8 function; for a per-tensor/per-channel FP8 layer what ``apply_fp8_linear`` picks from
  its scales' shape, the GPU and ``USE_TRITON_W8A8_FP8_KERNEL``; the FP4 runner; Marlin:
  :mod:`kernelpolicy.releases.sglang._linears`), and warns, naming the layer, when it is not
  the decided dense backend (a silent fallback);
- scheduler, after ``MoeRunner.__init__``: the same for the MoE runner each layer got;
- scheduler, around ``tiny_router_gemm_max_tokens`` (0.5.20+; SGLang has no flag for it): the
  router tier of the DeepSeek-family gate. Where the decision's router is not SGLang's tiny GEMM
  the gate is told it cannot use it (``-1``), so it runs cuBLAS; a decision SGLang's gate cannot
  follow (tiny GEMM ruled out for the shape, or a plain ``linear``) is a mismatch.

A mismatch or a fallback is a warning; ``KERNELPOLICY_STRICT=1`` makes it an error. An SGLang
release the per-release table does not know: one warning, nothing registered.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ...releases.sglang.names import ATTENTION_FIELDS, DENSE_FUNCTIONS, FLAG_FIELDS, attention_id, linear_run_by
from ...releases.sglang.versions import SglangRelease, known_releases, release_for
from ...render.summary import startup_summary
from .._runtime import DISABLE_ENV, AdapterError, Runtime
from ..agreement import AgreementError, check_agreement

if TYPE_CHECKING:
    import logging

__all__ = [
    "DISABLE_ENV",
    "SET_ENV",
    "AdapterError",
    "AgreementError",
    "current_decision",
    "register",
    "set_resolver",
    "status",
]


def _logger() -> logging.Logger:
    return _STATE.logger()


#: Names of the variables the plugin set in the main process (so child processes read the
#: deployment's own environment, not the plugin's settings, as facts).
SET_ENV: Final = "KERNELPOLICY_SGLANG_SET"
_SOURCE: Final = "kernelpolicy"


Resolver = Callable[[Any], Any]


@dataclasses.dataclass
class _State(Runtime):
    """The SGLang plugin's state: the shared lifecycle, the hooks and this process's one decision."""

    engine: ClassVar[str] = "sglang"
    stands: ClassVar[str] = "SGLang's own choice stands"
    release: SglangRelease | None = None
    hooks: list[str] = dataclasses.field(default_factory=list)
    decision: Any = None
    flags: dict[str, Any] | None = None
    facts: dict[str, object] = dataclasses.field(default_factory=dict)
    applied: dict[str, str] = dataclasses.field(default_factory=dict)
    #: where the deployment's own flag stands against the decision (attention: issue #39)
    conflicts: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def start_environ(self) -> dict[str, str]:
        """``os.environ`` without the variables the plugin itself set in the main process."""
        return _deployment_environ()


_STATE = _State()


def set_resolver(resolver: Resolver | None) -> None:
    """Replace how facts become a decision (tests); ``None`` restores the kernelpolicy core."""
    _STATE.resolver = resolver
    _STATE.decision = None


def _policy() -> Any:
    return _STATE.policy()


def _warn(text: str) -> None:
    _STATE.warn(text)


def _fail(text: str) -> None:
    """A problem applying the decision: a warning, or (``KERNELPOLICY_STRICT=1``) an error."""
    _STATE.fail(text)


def _deployment_environ() -> dict[str, str]:
    """``os.environ`` without the variables the plugin itself set in the main process."""
    env = dict(os.environ)
    for name in env.pop(SET_ENV, "").split(","):
        if name.strip():
            env.pop(name.strip(), None)
    return env


def _decide(server_args: Any) -> Any:
    """The decision for *server_args* in this process (resolved once, then cached)."""
    with _STATE.lock:
        if _STATE.decision is not None:
            return _STATE.decision

        from ...render.flags import engine_flags
        from ._facts import facts_from_sglang

        try:
            policy = _policy()
            engine = policy.engines["sglang"]
            values = {**facts_from_sglang(server_args, engine, policy.models), "deploy.engine": "sglang"}
            if _STATE.version:  # the release this process runs (its metadata may be missing)
                values["sglang.version"] = _STATE.version
            built = _STATE.built(values)
            decision = _STATE.decide(built)  # the conflicts recorded, as explain records them
        except AdapterError:
            raise
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            _fail(f"could not resolve a decision: {type(exc).__name__}: {first}")
            return None
        release = _STATE.release.version if _STATE.release else None
        _STATE.decision = decision
        _STATE.flags = engine_flags(decision.paths, engine, release, decision.facts)
        _STATE.facts = dict(built.facts.values)
        _logger().info(
            "kernelpolicy: sglang %s %s %s fingerprint=%s",
            _STATE.version,
            _STATE.facts.get("gpu.sm", "gpu=?"),
            startup_summary(decision),
            decision.fingerprint,
        )
        return decision


def _begin_deployment() -> None:
    """Forget this process's decision and what was applied, and read the environment again.

    For harnesses that run many deployments in one process (the simulated-GPU audit,
    :mod:`kernelpolicy.testing.sglang`); a real SGLang process serves one deployment.
    """
    with _STATE.lock:
        _STATE.environ = _deployment_environ()
        _STATE.decision = None
        _STATE.flags = None
        _STATE.facts = {}
        _STATE.applied = {}
        _STATE.conflicts = []
        _STATE.agreed = False
        _STATE.warnings = []
        _STATE.fallbacks = []


def current_decision() -> Any:
    """The decision this process resolved (``None`` before the first hook ran)."""
    return _STATE.decision


def _wanted_fields(server_args: Any) -> dict[str, str]:
    """Server-args field -> value the decision asks for, on the fields the operator left ``auto``
    (the attention backend: left unset, :func:`_attention_wanted`)."""
    args = list((_STATE.flags or {}).get("args", ()))
    out: dict[str, str] = {}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        field = FLAG_FIELDS.get(flag)
        if field == "attention_backend":
            out.update(_attention_wanted(server_args, value))
        elif field is not None and str(getattr(server_args, field, "auto") or "auto") == "auto":
            out[field] = value
    return out


def _attention_wanted(server_args: Any, value: str) -> dict[str, str]:
    """``{"attention_backend": value}`` when the operator set none of SGLang's attention backends
    (``--attention-backend``, ``--prefill-attention-backend``, ``--decode-attention-backend``);
    else nothing: the operator's choice stands, and where it is not the decided backend that is
    recorded as a conflict (a warning; an error under ``KERNELPOLICY_STRICT=1``)."""
    own = {f: str(v) for f in ATTENTION_FIELDS if (v := getattr(server_args, f, None)) is not None}
    if not own:
        return {"attention_backend": value}
    decided = getattr(_STATE.decision.paths.get("attention"), "backend", None) if _STATE.decision else None
    for field, name in own.items():
        if decided is not None and attention_id(name) != decided:
            flag = "--" + field.replace("_", "-")
            _STATE.conflicts.append({"path": "attention", "flag": flag, "deployment": name, "decision": str(decided)})
            _fail(
                f"the deployment sets {flag} `{name}`, the decided attention backend is `{decided}`;"
                " the deployment's stands"
            )
    return {}


def _apply_env() -> None:
    """Set the decision's environment (DeepGEMM off) before the schedulers start."""
    env: Mapping[str, str] = (_STATE.flags or {}).get("env", {})
    set_here = []
    for name, value in env.items():
        have = os.environ.get(name)
        if have is None:
            os.environ[name] = value
            set_here.append(name)
            _STATE.applied[name] = value
        elif have != value:
            _fail(f"the decision needs {name}={value}, the deployment sets {name}={have}")
    for message in _env_conflicts(env, os.environ):
        _fail(message)
    if set_here:
        os.environ[SET_ENV] = ",".join([*filter(None, os.environ.get(SET_ENV, "").split(",")), *set_here])


def _env_conflicts(wanted: Mapping[str, str], environ: Mapping[str, str]) -> list[str]:
    """SGLang switches the deployment set that contradict the decision (the rule tables name
    only ``SGLANG_ENABLE_JIT_DEEPGEMM``; these are checked here)."""
    out = []
    paths = _STATE.decision.paths if _STATE.decision is not None else {}
    backends = {getattr(paths.get(p), "backend", None) for p in ("dense", "moe")}
    legacy = environ.get("SGL_ENABLE_JIT_DEEPGEMM")
    if legacy is not None:
        off = legacy.strip().lower() in ("0", "false")
        if wanted.get("SGLANG_ENABLE_JIT_DEEPGEMM") == "0" and not off:
            out.append(f"SGL_ENABLE_JIT_DEEPGEMM={legacy} wins over SGLANG_ENABLE_JIT_DEEPGEMM=0; unset it")
        elif off and backends & {"deep_gemm", "flashinfer_deep_gemm"}:
            out.append(f"the decision runs DeepGEMM, the deployment sets SGL_ENABLE_JIT_DEEPGEMM={legacy}")
    dense = getattr(paths.get("dense"), "backend", None)
    if environ.get("SGLANG_FORCE_FP8_MARLIN", "").strip().lower() in ("1", "true") and dense not in (None, "marlin"):
        out.append(f"the decision's dense backend is `{dense}`, the deployment sets SGLANG_FORCE_FP8_MARLIN=1")
    if environ.get("USE_TRITON_W8A8_FP8_KERNEL", "").strip().lower() in ("1", "true") and dense not in (None, "triton"):
        out.append(f"the decision's dense backend is `{dense}`, the deployment sets USE_TRITON_W8A8_FP8_KERNEL=1")
    return out


def _resolution_hook(server_args: Any, previous: Callable[[Any], None]) -> None:
    """0.5.23: wraps ``handle_model_specific_adjustments`` (``fn(server_args, previous)``)."""
    decision = _decide(server_args)
    wanted = _wanted_fields(server_args) if decision is not None else {}
    previous(server_args)
    if decision is None:
        return
    if wanted:
        from sglang.srt.arg_groups.overrides import declare_resolution

        declare_resolution(server_args, _SOURCE, **wanted)
        _STATE.applied.update(wanted)
    _apply_env()  # also when no flag is wanted: an env-only choice (Marlin FP8, DeepGEMM off)


def _post_init_hook(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    """0.5.12.post1: around ``ServerArgs._handle_model_specific_adjustments`` (it mutates ``self``)."""
    decision = _decide(self)
    wanted = _wanted_fields(self) if decision is not None else {}
    result = original(self, *args, **kwargs)
    for field, value in wanted.items():
        setattr(self, field, value)
    _STATE.applied.update(wanted)
    if decision is not None:
        _apply_env()
    return result


def _scheduler_hook(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    """Around ``Scheduler.init_moe_gemm_config``: agree across ranks, then check SGLang's result."""
    server_args = getattr(self, "server_args", None)
    decision = _decide(server_args) if server_args is not None else None
    if decision is not None and not _STATE.agreed:
        _STATE.agreed = True
        rank = 0
        try:
            import torch.distributed as dist

            rank = int(dist.get_rank()) if dist.is_available() and dist.is_initialized() else 0
        except ImportError:
            pass
        summary = startup_summary(decision)
        check_agreement({"rank": rank, "fingerprint": decision.fingerprint, "summary": summary, "facts": _STATE.facts})
    result = original(self, *args, **kwargs)
    if decision is not None and server_args is not None:
        args_ = list((_STATE.flags or {}).get("args", ()))
        for flag, value in zip(args_[::2], args_[1::2], strict=True):
            field = FLAG_FIELDS.get(flag)
            got = _resolved_field(server_args, field) if field else None
            if field == "attention_backend":
                _check_attention(server_args, value)
            elif field and got is not None and str(got) != value:
                _fail(f"SGLang resolved {field}=`{got}`, the decision is `{value}` ({flag})")
    return result


def _check_attention(server_args: Any, value: str) -> None:
    """After resolution: the attention backends SGLang resolved for prefill and decode against the
    decision (by kernelpolicy id: ``fa3`` and ``fa4`` are both ``flash_attn``). The operator's own
    choice was recorded as a conflict when the plugin left it standing."""
    if _STATE.conflicts:
        return
    decided = attention_id(value)
    base = _resolved_field(server_args, "attention_backend")
    for field in ATTENTION_FIELDS:
        got = _resolved_field(server_args, field) or base
        if got is not None and attention_id(got) != decided:
            _fail(f"SGLang resolved {field}=`{got}`, the decision is `{value}` (--attention-backend)")


def _resolved_field(server_args: Any, field: str) -> Any:
    """A server-args field as SGLang resolved it: 0.5.23 keeps what resolution declared beside
    the operator's input (``resolution_result``); 0.5.12.post1 writes it to the field."""
    try:
        from sglang.srt.arg_groups.overrides import resolution_result
    except ImportError:
        return getattr(server_args, field, None)
    return resolution_result(server_args, field)


def _layer_hook(result: Any, *args: Any, **kwargs: Any) -> None:
    """After ``<QuantConfig>.get_quant_method(self, layer, prefix)``: the GEMM a linear layer calls."""
    decision = _STATE.decision
    layer = kwargs.get("layer", args[1] if len(args) > 1 else None)
    name = linear_run_by(result, layer)
    backend = getattr(decision.paths.get("dense"), "backend", None) if decision is not None else None
    if name is None or name not in DENSE_FUNCTIONS or backend is None or backend in DENSE_FUNCTIONS[name]:
        return
    prefix = kwargs.get("prefix", args[2] if len(args) > 2 else "?")
    _STATE.fallbacks.append({"layer": str(prefix), "runs": name, "decided": str(backend)})
    _fail(f"layer `{prefix}` runs `{name}`, not the decided dense backend `{backend}`")


def _runner_hook(result: Any, *args: Any, **kwargs: Any) -> None:
    """After ``MoeRunner.__init__(self, runner_backend, config, ...)``: the runner a MoE layer got.

    Quant methods that call their kernels directly bypass ``MoeRunner``; those are not seen here.
    """
    from ...releases.sglang.flags import moe_ids_of

    decision = _STATE.decision
    backend = getattr(decision.paths.get("moe"), "backend", None) if decision is not None else None
    runner = kwargs.get("runner_backend", args[1] if len(args) > 1 else None)
    config = kwargs.get("config", args[2] if len(args) > 2 else None)
    name = str(getattr(runner, "value", runner))
    if backend is None or runner is None or name == "auto":
        return
    if backend in moe_ids_of(_policy().engines["sglang"]).get(name, ()):
        return
    layer = getattr(config, "layer_id", None)
    where = f"MoE layer {layer}" if layer is not None else "a MoE layer"
    _STATE.fallbacks.append({"layer": where, "runs": name, "decided": str(backend)})
    _fail(f"{where} runs the `{name}` MoE runner, not the decided MoE backend `{backend}`")


def _router_hook(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Around ``tiny_router_gemm_max_tokens(*, num_experts, hidden_size, weight_dtype)``: rows up
    to which a DeepSeek-family gate runs SGLang's tiny GEMM (``-1``: never; the gate runs cuBLAS)."""
    rows = original(*args, **kwargs)
    decision = _STATE.decision
    if decision is None:  # the scheduler hook decides first; a gate built elsewhere reads the record
        try:
            from sglang.srt.runtime_context import get_server_args

            decision = _decide(get_server_args())
        except Exception:  # no published server args: nothing to hold the gate to
            return rows
    router = decision.paths.get("router") if decision is not None else None
    backend = getattr(router, "backend", None)
    if backend is None:
        return rows
    shape = f"{kwargs.get('num_experts', '?')} experts x hidden {kwargs.get('hidden_size', '?')}"
    if backend == "tiny_gemm":
        if rows <= 0:
            _fail(f"the decision's router is `tiny_gemm`, SGLang rules it out for this gate ({shape})")
        return rows
    if rows <= 0:  # the gate does not run the tiny GEMM (an FP32 weight, a shape it cannot serve)
        return rows
    if backend != "cublas":  # held off the tiny GEMM, the gate runs cuBLAS, not this
        _fail(f"the decision's router is `{backend}`; held off `tiny_gemm`, SGLang's DeepSeek gate runs `cublas`")
    _STATE.applied["router"] = backend
    return -1


#: The quant configs whose linear methods pick their GEMM per call or from a published runner
#: (read from the 0.5.23 wheel, ``sglang/srt/layers/quantization/``); ``Fp8Config`` is the
#: release table's ``dense_layer`` selection point.
_LINEAR_CONFIGS: Final = (
    "sglang.srt.layers.quantization.compressed_tensors.compressed_tensors.CompressedTensorsConfig.get_quant_method",
    "sglang.srt.layers.quantization.modelopt_quant.ModelOptFp8Config.get_quant_method",
    "sglang.srt.layers.quantization.modelopt_quant.ModelOptFp4Config.get_quant_method",
    "sglang.srt.layers.quantization.gptq.gptq.GPTQMarlinConfig.get_quant_method",
    "sglang.srt.layers.quantization.awq.awq.AWQMarlinConfig.get_quant_method",
)
_LINEAR_CONFIGS_SINCE: Final = "0.5.23"


def _linear_config_targets(release: SglangRelease) -> tuple[str, ...]:
    """The quant configs' ``get_quant_method`` the layer hook wraps beside ``Fp8Config``'s."""
    from packaging.version import Version

    return _LINEAR_CONFIGS if Version(release.version) >= Version(_LINEAR_CONFIGS_SINCE) else ()


def _installed_sglang() -> str | None:
    version = getattr(sys.modules.get("sglang"), "__version__", None)
    if isinstance(version, str):
        return version
    import importlib.metadata as md  # here: `explain --json` imports this module for the release tables

    try:
        return md.version("sglang")
    except md.PackageNotFoundError:
        return None


def _target(release: SglangRelease, role: str) -> str | None:
    point = release.selection_points.get(role)
    return f"{point['module']}.{point['name']}" if point else None


def register() -> None:
    """The ``sglang.srt.plugins`` entry point: register the hooks (idempotent)."""
    with _STATE.lock:
        if _STATE.registered:
            return
        _STATE.registered = True
        if _STATE.disabled():
            _logger().info("kernelpolicy: %s is set; the SGLang plugin does nothing", DISABLE_ENV)
            return
        _STATE.environ = _deployment_environ()
        version = _installed_sglang()
        _STATE.version = version
        release = release_for(version) if version else None
        if release is None:
            known = ", ".join(known_releases())
            message = (
                f"kernelpolicy: SGLang {version or '(not found)'} is not a release this plugin knows "
                f"({known}); nothing is patched, SGLang decides on its own"
            )
            _STATE.unknown_release(message)
            return
        _STATE.release = release
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        hooks: list[tuple[str | None, Callable[..., Any], Any]] = [
            (_target(release, "scheduler_gemm_config"), _scheduler_hook, HookType.AROUND),
            (_target(release, "dense_layer"), _layer_hook, HookType.AFTER),
            (_target(release, "moe_runner"), _runner_hook, HookType.AFTER),
        ]
        hooks.extend((target, _layer_hook, HookType.AFTER) for target in _linear_config_targets(release))
        if _target(release, "router_tier") is not None:  # 0.5.20+; before, the gate decides inline
            hooks.append((_target(release, "router_tier"), _router_hook, HookType.AROUND))
        if release.resolution == "hooks":
            from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook

            register_resolution_hook("handle_model_specific_adjustments")(_resolution_hook)
            _STATE.hooks.append("resolution:handle_model_specific_adjustments")
        else:
            hooks.append((_target(release, "resolution_post_init"), _post_init_hook, HookType.AROUND))
        for target, hook, kind in hooks:
            if target is None:
                _fail(f"SGLang {version} lacks the selection point of `{hook.__name__}`")
                continue
            HookRegistry.register(target, hook, kind)
            _STATE.hooks.append(target)


def status() -> dict[str, Any]:
    """What the plugin did in this process (JSON-ready)."""
    d = _STATE.decision
    out: dict[str, Any] = json.loads(
        json.dumps(
            {
                "registered": _STATE.registered,
                "sglang_version": _STATE.version,
                "hooks": list(_STATE.hooks),
                "fingerprint": getattr(d, "fingerprint", None),
                "summary": startup_summary(d) if d is not None else None,
                "flags": _STATE.flags,
                "applied": dict(_STATE.applied),
                "fallbacks": [dict(f) for f in _STATE.fallbacks],
                "conflicts": [dict(c) for c in _STATE.conflicts],
                "warnings": list(_STATE.warnings),
            },
            default=str,
        )
    )
    return out
