"""kernelpolicy's vLLM plugin: one decision, applied at every FP8 kernel selection point.

Registered as ``vllm.general_plugins: kernelpolicy = kernelpolicy.engines.vllm.plugin:register``.
vLLM calls :func:`register` once per process (front end, engine core, every worker, the
model-inspection subprocess). It installs wrappers at the selection points of the installed
release (:mod:`.versions`); the decision itself is resolved lazily, at the first selection
point that needs it, from vLLM's own config, platform, environment and installed packages, and
cached per process. Where:

- dense: ``choose_scaled_mm_linear_kernel`` (a module global of the dense module, so every
  by-name importer of ``init_fp8_linear_kernel`` goes through it) gets a kernel table with the
  decided kernel first and the kernels the decision rejected removed; the weight-only, NVFP4,
  MXFP4 and MXFP8 selectors (``choose_mp_linear_kernel``, ``init_*_linear_kernel``) are offered
  the decided kernel alone, vLLM's own table deciding when it cannot serve the layer;
- moe: ``select_fp8_moe_backend`` in the oracle and in every by-name importer is wrapped to
  force the decided backend with ``dataclasses.replace(config, moe_backend=...)``; so are the
  MXFP4 (``select_mxfp4_moe_backend``, ``select_deepseek_v4_mxfp4_moe_backend``), MXFP8 and
  NVFP4 oracles, with each oracle's own ``moe_backend`` names. Where an oracle has no name for
  the decided backend, vLLM's pick stands unless the decision rejects it; then the first viable
  backend of the decision the oracle can name is forced;
- warmup: the DeepGEMM warmup selectors warm only kernels in ``decision.warmup``;
- router: ``GateLinear.__init__``/``set_out_dtype`` keep the decided tier, or else the
  decision's next valid tier vLLM enabled for that gate (one warning), and clear the others;
- config: ``should_auto_disable_deep_gemm`` (and its by-name copies) says "disable" exactly when
  the decision rejects DeepGEMM;
- attention: ``get_attn_backend`` (vLLM's attention selector, and every by-name importer) runs
  with ``attention_config.backend`` set to the decided backend (:mod:`._attention`); where vLLM
  refuses it for a layer, vLLM's own choice stands for that layer (one warning, kept in
  :func:`status`; ``KERNELPOLICY_STRICT=1`` stops instead). The operator's own
  ``--attention-backend`` is kept before vLLM's model code can change it
  (``VllmConfig.try_verify_and_update_config``): it is a fact of the decision, and it stays in
  place; where the decision chose another backend (a rule refused the operator's), that is a
  conflict, said and kept in :func:`status` (``KERNELPOLICY_STRICT=1``: start-up stops).

Unsupported vLLM release: one warning, nothing patched (``KERNELPOLICY_STRICT=1``: raise).
When ``torch.distributed`` is initialised with more than one rank, the ranks all-gather their
fingerprints at the first decision and raise :class:`AgreementError` when they differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.metadata as md
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Protocol

from ...deployment.pipeline import STRICT_ENV
from ...releases.vllm.names import (
    DENSE_BLOCK_KERNELS,
    DENSE_LINEAR_KERNELS,
    DENSE_MP_KERNELS,
    DENSE_TENSOR_KERNELS,
    MOE_CLI_NAMES,
    MOE_ORACLE_NAMES,
    ROUTER_FLAGS,
    dense_id_of,
    oracle_moe_id_of,
)
from ...releases.vllm.versions import (
    DG_KERNEL_MODULE,
    DG_UTILS_MODULE,
    MoeOracle,
    VllmPatchPoints,
    known_span,
    patch_points_for,
)
from ...render.summary import startup_summary
from .._runtime import DISABLE_ENV, AdapterError, Runtime, message
from ..agreement import AgreementError, agreement_report, check_agreement

__all__ = [
    "AdapterError",
    "AgreementError",
    "DecisionLike",
    "agreement_report",
    "check_agreement",
    "current_decision",
    "register",
    "set_resolver",
    "status",
    "unpatch",
]

logger = logging.getLogger("kernelpolicy.vllm")


class _PathLike(Protocol):
    @property
    def backend(self) -> str | None: ...
    @property
    def rule(self) -> str | None: ...
    @property
    def candidates(self) -> Any: ...


class DecisionLike(Protocol):
    """What the plugin reads from a :class:`kernelpolicy.Decision`."""

    @property
    def paths(self) -> Mapping[str, Any]: ...
    @property
    def warmup(self) -> tuple[str, ...]: ...
    @property
    def fingerprint(self) -> str: ...


Resolver = Callable[[Any], DecisionLike]
"""How the plugin's :class:`kernelpolicy.Facts` become a decision (``kernelpolicy.resolve``)."""


@dataclasses.dataclass
class _State(Runtime):
    """The vLLM plugin's state: the shared lifecycle, the patches and the decisions per config."""

    engine: ClassVar[str] = "vllm"
    stands: ClassVar[str] = "leaving vLLM's own choice in place"
    points: VllmPatchPoints | None = None
    patches: list[tuple[Any, str, Any, bool]] = dataclasses.field(default_factory=list)
    patched: list[str] = dataclasses.field(default_factory=list)
    decisions: dict[str, DecisionLike] = dataclasses.field(default_factory=dict)
    #: the decision of each config this process asked about, by :func:`._facts.config_key`:
    #: vLLM asks at every selection point of every layer, and gathering facts takes milliseconds
    by_config: dict[tuple[object, ...], DecisionLike] = dataclasses.field(default_factory=dict)
    facts: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)
    logged: set[str] = dataclasses.field(default_factory=set)
    late_importers: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: the operator's explicit choices the decision did not keep (they stand): one record each
    conflicts: list[dict[str, str]] = dataclasses.field(default_factory=list)


_STATE = _State()
_MARK: Final = "__kernelpolicy_wrapped__"


def set_resolver(resolver: Resolver | None) -> None:
    """Replace how facts become a decision (tests); ``None`` restores the kernelpolicy core."""
    _STATE.resolver = resolver
    _STATE.decisions.clear()
    _STATE.by_config.clear()
    _STATE.facts.clear()


def _core_resolver(facts: Any) -> DecisionLike:
    """The kernelpolicy core's decision for *facts* (whatever resolver a test set)."""
    import kernelpolicy as kp

    decision: DecisionLike = kp.resolve(facts, _STATE.policy())
    return decision


def _pipeline_facts(values: Mapping[str, object]) -> Any:
    """The one fact pipeline (as ``kernelpolicy explain``): vLLM's facts, then the environment."""
    return _pipeline_built(values).facts


def _pipeline_built(values: Mapping[str, object]) -> Any:
    """:func:`_pipeline_facts`, with the conflicts a decision records (its warnings said).

    The environment is the one the deployment was started with: vLLM itself sets some
    variables while it builds its config (VLLM_USE_DEEP_GEMM_E8M0 for UE8M0 checkpoints),
    which are not inputs."""
    return _STATE.built(values)


# ----------------------------------------------------------------------------- patch bookkeeping


def _set(owner: Any, name: str, value: Any, label: str) -> None:
    had = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
    original = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name, None)
    setattr(owner, name, value)
    _STATE.patches.append((owner, name, original, had))
    _STATE.patched.append(label)


def _wrapped(fn: Any) -> bool:
    return bool(getattr(fn, _MARK, False))


def unpatch() -> None:
    """Undo every patch and forget the cached decisions (for tests; idempotent)."""
    with _STATE.lock:
        while _STATE.patches:
            owner, name, original, had = _STATE.patches.pop()
            if had:
                setattr(owner, name, original)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
        # modules imported after register() took the wrappers by name: give them the originals
        for mod_name, attr in _STATE.late_importers:
            mod = sys.modules.get(mod_name)
            value = getattr(mod, attr, None) if mod is not None else None
            if value is not None and _wrapped(value):
                setattr(mod, attr, value.__kernelpolicy_original__)
        _STATE.late_importers.clear()
        # the attention layers' modules (many, per release) took the selector's wrapper by name
        for mod_name, mod in list(sys.modules.items()):
            value = vars(mod).get("get_attn_backend") if mod_name.startswith("vllm.") and mod is not None else None
            if value is not None and _wrapped(value):
                setattr(mod, "get_attn_backend", value.__kernelpolicy_original__)  # noqa: B010
        _STATE.patched.clear()
        _STATE.decisions.clear()
        _STATE.by_config.clear()
        _STATE.facts.clear()
        _STATE.logged.clear()
        _STATE.conflicts.clear()
        _STATE.reset()
        _STATE.points = None


# ----------------------------------------------------------------------------- the decision


def _vllm_config_now() -> Any:
    cfg_mod = sys.modules.get("vllm.config")
    getter = getattr(cfg_mod, "get_current_vllm_config_or_none", None) if cfg_mod else None
    config = getter() if callable(getter) else None
    if config is not None and getattr(config, "model_config", None) is not None:
        return config
    # VllmConfig.__post_init__ asks should_auto_disable_deep_gemm before the config is
    # current: find the config being built on the stack.
    frame: Any = sys._getframe(1)
    for _ in range(12):
        if frame is None:
            break
        candidate = frame.f_locals.get("self")
        if type(candidate).__name__ == "VllmConfig" and getattr(candidate, "model_config", None):
            return candidate
        frame = frame.f_back
    return config


def _entry(decision: DecisionLike, values: Mapping[str, object]) -> dict[str, Any]:
    rank = 0
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank = int(dist.get_rank())
    except ImportError:
        pass
    return {
        "rank": rank,
        "fingerprint": decision.fingerprint,
        "summary": startup_summary(decision),
        "facts": {k: values[k] for k in sorted(values)},
    }


def current_decision() -> DecisionLike | None:
    """The decision for the vLLM config of this process (resolved once, then cached).

    vLLM asks at every selection point of every layer (hundreds of times for a large model):
    once registered (the environment fixed), the facts are gathered once per config
    (:func:`._facts.config_key`), and a decision is resolved once per distinct set of facts.
    ``None`` when no model config is known yet or resolving failed (outside strict mode).
    """
    config = _vllm_config_now()
    if config is None or getattr(config, "model_config", None) is None:
        return None
    if _STATE.environ is None:  # not registered: the live environment may change between asks
        return _decide(config)
    from ._facts import config_key

    key = config_key(config)
    with _STATE.lock:
        decision = _STATE.by_config.get(key)
        if decision is None:
            decision = _decide(config)
            if decision is not None:
                _STATE.by_config[key] = decision
        return decision


def _decide(config: Any) -> DecisionLike | None:
    """The decision for *config*: its facts gathered through the one pipeline, then resolved
    (once per distinct set of facts), logged, and checked across ranks."""
    with _STATE.lock:
        try:
            from ._facts import facts_from_vllm

            built = _pipeline_built(facts_from_vllm(config, _STATE.policy().models))
            facts = built.facts
        except Exception as exc:
            _fail(f"could not gather facts: {message(exc)}")
            return None
        values = dict(facts.values)
        key = json.dumps(values, sort_keys=True, default=str)
        cached = _STATE.decisions.get(key)
        if cached is not None:
            return cached
        try:
            decision: DecisionLike = _STATE.decide(built)
        except Exception as exc:
            _fail(f"could not resolve a decision: {message(exc)}")
            return None
        _STATE.decisions[key] = decision
        resolved = getattr(getattr(decision, "facts", None), "values", None)  # with implied facts
        _STATE.facts[key] = dict(resolved) if isinstance(resolved, Mapping) else values
        if decision.fingerprint not in _STATE.logged:
            _STATE.logged.add(decision.fingerprint)
            logger.info(
                "kernelpolicy: vllm %s %s %s fingerprint=%s",
                _STATE.version,
                values.get("gpu.sm", "gpu=?"),
                startup_summary(decision),
                decision.fingerprint,
            )
        if not _STATE.agreed:
            _STATE.agreed = True
            check_agreement(_entry(decision, values))
        return decision


def _warn(text: str) -> None:
    _STATE.warn(text)


def _fail(text: str) -> None:
    _STATE.fail(text)


def _rejected(decision: DecisionLike, path: str) -> set[str]:
    p = decision.paths.get(path)
    out: set[str] = set()
    for cand in getattr(p, "candidates", None) or ():
        verdict = getattr(cand, "verdict", None)
        backend = getattr(cand, "backend", None)
        if verdict in ("rejected", "refused") and isinstance(backend, str):
            out.add(backend)
    return out


def _backend(decision: DecisionLike, path: str) -> str | None:
    p = decision.paths.get(path)
    backend = getattr(p, "backend", None)
    return backend if isinstance(backend, str) else None


def _deep_gemm_denied(decision: DecisionLike) -> bool:
    """The decision rejects DeepGEMM (vLLM's "auto-disable" question, answered by policy).

    False when a path runs DeepGEMM; DeepGEMM that is merely not chosen is left to the
    reordered kernel tables rather than reported as disabled.
    """
    if _backend(decision, "dense") in ("deep_gemm", "flashinfer_deep_gemm"):
        return False
    if _backend(decision, "moe") == "deep_gemm":
        return False
    return "deep_gemm" in _rejected(decision, "dense") | _rejected(decision, "moe")


# ----------------------------------------------------------------------------- the wrappers


def _mark(fn: Any, original: Any) -> Any:
    functools.update_wrapper(fn, original)
    setattr(fn, _MARK, True)
    fn.__kernelpolicy_original__ = original
    return fn


def _reorder_table(table: Any, decision: DecisionLike, block: bool) -> Any:
    chosen = _backend(decision, "dense")
    if chosen is None:
        return table
    names = (DENSE_BLOCK_KERNELS if block else DENSE_TENSOR_KERNELS).get(chosen, ())
    rejected = _rejected(decision, "dense")
    out = {}
    for platform_key, kernels in dict(table).items():
        first = [k for k in kernels if k.__name__ in names]
        rest = [k for k in kernels if k.__name__ not in names and (dense_id_of(k.__name__) or "?") not in rejected]
        out[platform_key] = first + rest
    return out


def _patch_dense(points: VllmPatchPoints) -> None:
    mod = importlib.import_module(points.dense_module)
    original = mod.choose_scaled_mm_linear_kernel
    if _wrapped(original):
        return
    block_table = mod._POSSIBLE_FP8_BLOCK_KERNELS

    def choose_scaled_mm_linear_kernel(config: Any, possible_kernels: Any, *a: Any, **kw: Any) -> Any:
        decision = current_decision()
        if decision is None or kw.get("force_kernel") is not None:
            return original(config, possible_kernels, *a, **kw)
        block = possible_kernels is block_table or possible_kernels is getattr(mod, "_POSSIBLE_FP8_BLOCK_KERNELS", None)
        try:
            return original(config, _reorder_table(possible_kernels, decision, block), *a, **kw)
        except _REFUSALS as exc:
            # no kernel the decision allows can implement this layer: vLLM's own table decides
            reason = message(exc)
            if _STATE.strict():
                raise AdapterError(
                    f"kernelpolicy: vLLM can implement this dense layer with no kernel the decision allows "
                    f"({STRICT_ENV} is set, so start-up stops): {reason}"
                ) from exc
            chosen = original(config, possible_kernels, *a, **kw)
            name = getattr(chosen, "__name__", None) or type(chosen).__name__
            _fallback(
                decision,
                _backend(decision, "dense") or "?",
                f"{name} (vLLM's own)",
                "dense kernel table",
                [f"every allowed kernel ({reason})"],
                path="dense",
            )
            return chosen

    _set(
        mod,
        "choose_scaled_mm_linear_kernel",
        _mark(choose_scaled_mm_linear_kernel, original),
        "dense",
    )


#: vLLM's linear selectors that read a module-global kernel table, and are called by name from
#: the quantization methods: (function, table, dense id -> kernel class names, where, layers).
_LINEAR_TABLES: Final = (
    ("choose_mp_linear_kernel", "_POSSIBLE_KERNELS", DENSE_MP_KERNELS, "weight-only"),
    ("init_nvfp4_linear_kernel", "_POSSIBLE_NVFP4_KERNELS", DENSE_LINEAR_KERNELS, "NVFP4"),
    ("init_mxfp4_linear_kernel", "_POSSIBLE_MXFP4_KERNELS", DENSE_LINEAR_KERNELS, "MXFP4"),
    ("init_mxfp8_linear_kernel", "_POSSIBLE_MXFP8_KERNELS", DENSE_LINEAR_KERNELS, "MXFP8"),
)


def _patch_linear_tables(points: VllmPatchPoints) -> None:
    """The weight-only (W4A16/W8A16), NVFP4, MXFP4 and MXFP8 linears: each selector tries the
    decided kernel first; vLLM's own table decides when that kernel cannot serve the layer (one
    warning, kept in :func:`status`; ``KERNELPOLICY_STRICT=1`` stops instead).

    vLLM's GPTQ, AWQ, ModelOpt and compressed-tensors methods import the selectors by name, so
    the copies already imported are replaced too; modules imported later take the wrapper."""
    mod = importlib.import_module(points.dense_module)
    for fn_name, table_name, ids, layers in _LINEAR_TABLES:
        original = getattr(mod, fn_name, None)
        if original is None or _wrapped(original) or not isinstance(getattr(mod, table_name, None), dict):
            continue  # a release without this selector, or whose table lives elsewhere
        wrapper = _mark(_linear_wrapper(mod, original, table_name, ids, layers), original)
        _set(mod, fn_name, wrapper, f"dense:{fn_name}")
        for name, imp in list(sys.modules.items()):
            if name.startswith("vllm.") and getattr(imp, fn_name, None) is original:
                _STATE.late_importers.append((name, fn_name))
                _set(imp, fn_name, wrapper, f"dense:{name}.{fn_name}")


def _linear_wrapper(
    mod: Any, original: Any, table_name: str, ids: Mapping[str, tuple[str, ...]], layers: str
) -> Callable[..., Any]:
    def select(*a: Any, **kw: Any) -> Any:
        decision = current_decision()
        chosen = _backend(decision, "dense") if decision is not None else None
        names = ids.get(chosen or "", ())
        table = getattr(mod, table_name)
        if decision is None or chosen is None or not any(k.__name__ in names for ks in table.values() for k in ks):
            return original(*a, **kw)
        # only the decided kernel: vLLM's own checks (disabled kernels, capability, can_implement)
        # judge it, and its device priority (Humming ahead of Marlin on sm90) moves nothing ahead
        setattr(mod, table_name, {key: [k for k in ks if k.__name__ in names] for key, ks in table.items()})
        try:
            return original(*a, **kw)
        except _REFUSALS as exc:
            reason = message(exc).splitlines()[-1].strip()
        finally:
            setattr(mod, table_name, table)
        if _STATE.strict():
            raise AdapterError(
                f"kernelpolicy: vLLM cannot implement this {layers} linear layer with the decided "
                f"`{chosen}` ({STRICT_ENV} is set, so start-up stops): {reason}"
            )
        picked = original(*a, **kw)
        used = f"{getattr(picked, '__name__', None) or type(picked).__name__} (vLLM's own)"
        _fallback(decision, chosen, used, f"{layers} linear kernel table", [f"`{chosen}` ({reason})"], path="dense")
        return picked

    return select


def _patch_moe(points: VllmPatchPoints) -> None:
    oracle = importlib.import_module(points.moe_oracle_module)
    original = oracle.select_fp8_moe_backend
    if _wrapped(original):
        return

    def select_fp8_moe_backend(config: Any, *args: Any, **kwargs: Any) -> Any:
        decision = current_decision()
        chosen = _backend(decision, "moe") if decision is not None else None
        if decision is None or chosen is None:
            return original(config, *args, **kwargs)
        if MOE_CLI_NAMES.get(chosen) is None:
            _fail(f"no vLLM --moe-backend name for the decided MoE backend `{chosen}`")
            return original(config, *args, **kwargs)

        def attempt(backend: str) -> Callable[[], Any] | None:
            name = MOE_CLI_NAMES.get(backend)
            if name is None:
                return None
            cfg = _with_moe_backend(config, name)
            a, kw = args, dict(kwargs)
            if backend == "vllm_cutlass":
                if len(a) >= 3:
                    a = (*a[:2], True, *a[3:])
                else:
                    kw["allow_vllm_cutlass"] = True
            return lambda: original(cfg, *a, **kw)

        return _first_accepted("FP8 MoE oracle", decision, chosen, attempt, lambda: original(config, *args, **kwargs))

    wrapper = _mark(select_fp8_moe_backend, original)
    _set(oracle, "select_fp8_moe_backend", wrapper, "moe")
    for name in points.moe_select_importers:
        _STATE.late_importers.append((name, "select_fp8_moe_backend"))
        mod = sys.modules.get(name)  # modules imported later pick the wrapper up by name
        if mod is not None and getattr(mod, "select_fp8_moe_backend", None) is original:
            _set(mod, "select_fp8_moe_backend", wrapper, f"moe:{name}")


def _viable(decision: DecisionLike, path: str) -> list[str]:
    p = decision.paths.get(path)
    return [
        c.backend
        for c in getattr(p, "candidates", None) or ()
        if getattr(c, "verdict", None) == "viable" and isinstance(getattr(c, "backend", None), str)
    ]


_REFUSALS: Final = (ValueError, NotImplementedError)


def _with_moe_backend(config: Any, name: str) -> Any:
    if getattr(config, "moe_backend", name) == name:
        return config
    return dataclasses.replace(config, moe_backend=name)


def _picked(result: Any) -> str | None:
    """The backend member name an oracle returned (``(backend, experts)`` or the backend)."""
    member = result[0] if isinstance(result, tuple) and result else result
    name = getattr(member, "name", None)
    return name if isinstance(name, str) else None


def _first_accepted(
    where: str,
    decision: DecisionLike,
    chosen: str,
    attempt: Callable[[str], Callable[[], Any] | None],
    native: Callable[[], Any],
    *,
    first: bool = True,
) -> Any:
    """The decided MoE backend, or else the decision's next valid candidate vLLM accepts.

    *attempt* gives, for a kernelpolicy backend id, the call that makes vLLM select it (or
    ``None`` where *where* has no name for it). vLLM refusing the decided backend stops
    start-up under ``KERNELPOLICY_STRICT=1``; otherwise the next viable candidates are tried in
    the decision's order, and when vLLM accepts none of them its own choice (*native*) stands.
    Each fallback is one warning naming both backends, kept in :func:`status`.
    """
    order = ([chosen] if first else []) + [b for b in _viable(decision, "moe") if b != chosen]
    refused: list[str] = []
    for backend in order:
        call = attempt(backend)
        if call is None:
            continue
        try:
            result = call()
        except _REFUSALS as exc:
            reason = message(exc)
            if _STATE.strict():
                raise AdapterError(
                    f"kernelpolicy: vLLM's {where} refused the decided MoE backend `{backend}` "
                    f"({STRICT_ENV} is set, so start-up stops): {reason}"
                ) from exc
            refused.append(f"`{backend}` ({reason})")
            continue
        if backend != chosen or refused:
            _fallback(decision, chosen, backend, where, refused)
        return result
    if _STATE.strict() and not first:
        raise AdapterError(
            f"kernelpolicy: vLLM's {where} can select no backend the decision allows "
            f"(decided `{chosen}`; {STRICT_ENV} is set, so start-up stops)"
        )
    result = native()
    picked = _picked(result) or "its own choice"
    _fallback(decision, chosen, f"{picked} (vLLM's own)", where, refused)
    return result


def _fallback(
    decision: DecisionLike,
    chosen: str,
    used: str,
    where: str,
    refused: list[str],
    *,
    path: str = "moe",
    why: str | None = None,
) -> None:
    if why is None:
        why = "refused " + ", ".join(refused) if refused else f"has no name for `{chosen}`"
    record = {"path": path, "decided": chosen, "used": used, "where": where, "reason": why}
    with _STATE.lock:
        if record in _STATE.fallbacks:
            return
        _STATE.fallbacks.append(record)
    used_text = used if "(" in used else f"`{used}`, the decision's next valid candidate"
    message = f"vLLM's {where} {why}; {path} uses {used_text} instead of the decided `{chosen}`"
    _STATE.warnings.append(message)
    logger.warning("kernelpolicy: %s (fingerprint=%s)", message, decision.fingerprint)


def _oracle_wrapper(oracle: MoeOracle, original: Any) -> Any:
    names = MOE_ORACLE_NAMES[oracle.scheme]
    where = f"{oracle.scheme.upper()} MoE oracle"

    def select(config: Any, *args: Any, **kwargs: Any) -> Any:
        decision = current_decision()
        chosen = _backend(decision, "moe") if decision is not None else None
        if decision is None or chosen is None:
            return original(config, *args, **kwargs)

        def attempt(backend: str) -> Callable[[], Any] | None:
            name = names.get(backend)
            if name is None or name not in oracle.names:
                return None
            cfg = _with_moe_backend(config, name)
            return lambda: original(cfg, *args, **kwargs)

        if attempt(chosen) is not None:
            return _first_accepted(where, decision, chosen, attempt, lambda: original(config, *args, **kwargs))
        # this oracle cannot name the decided backend: vLLM's pick stands unless it is rejected
        result = original(config, *args, **kwargs)
        picked = oracle_moe_id_of(oracle.scheme, _picked(result))
        if picked is None or picked not in _rejected(decision, "moe"):
            return result
        return _first_accepted(where, decision, chosen, attempt, lambda: result, first=False)

    return _mark(select, original)


def _patch_moe_oracles(points: VllmPatchPoints) -> None:
    for oracle in points.moe_oracles:
        try:
            mod = importlib.import_module(oracle.module)
        except Exception as exc:  # one oracle failing to import must not cost the others
            _fail(f"could not import the {oracle.scheme} MoE oracle: {message(exc)}")
            continue
        for fn_name in oracle.functions:
            original = getattr(mod, fn_name, None)
            if original is None or _wrapped(original):
                continue
            wrapper = _oracle_wrapper(oracle, original)
            _set(mod, fn_name, wrapper, f"moe.{oracle.scheme}:{fn_name}")
            for name in oracle.importers:
                _STATE.late_importers.append((name, fn_name))
                imp = sys.modules.get(name)
                if imp is not None and getattr(imp, fn_name, None) is original:
                    _set(imp, fn_name, wrapper, f"moe.{oracle.scheme}:{name}")


def _patch_warmup(points: VllmPatchPoints) -> None:
    mod = importlib.import_module(points.warmup_module)
    gates: list[tuple[str, str]] = [(points.dense_warmup_gate, "deep_gemm.dense")]
    gates += [(g, "deep_gemm.moe") for g in points.moe_warmup_gates]
    for gate_name, kernel in gates:
        original = getattr(mod, gate_name, None)
        if original is None or _wrapped(original):
            continue
        returns_data = gate_name == "_deep_gemm_linear_data"

        def gate(
            module: Any,
            *a: Any,
            _o: Any = original,
            _k: str = kernel,
            _d: bool = returns_data,
            **kw: Any,
        ) -> Any:
            decision = current_decision()
            # the dense DeepGEMM warmup also warms the FlashInfer DeepGEMM kernel's DeepGEMM
            names = {_k, "flashinfer_deep_gemm.dense"} if _k == "deep_gemm.dense" else {_k}
            if decision is not None and not names & set(decision.warmup):
                return None if _d else False
            return _o(module, *a, **kw)

        _set(mod, gate_name, _mark(gate, original), f"warmup:{gate_name}")


def _router_flag_backend(attr: str) -> str | None:
    return "bf16x3" if attr == "allow_rocm_bf16x3_router_gemm" else ROUTER_FLAGS.get(attr)


def _clear_router_flags(layer: Any) -> None:
    """Keep one router tier on *layer*: the decided one, or else the decision's next valid
    candidate that vLLM enabled for this layer (its weight dtype or shape may rule the decided
    tier out); clear the ``allow_*`` flags of every other tier."""
    decision = current_decision()
    if decision is None:
        return
    chosen = _backend(decision, "router")
    if chosen is None:
        return
    flags = [a for a in vars(layer) if a.startswith("allow_") and a.endswith("_gemm")]
    enabled = {_router_flag_backend(a) for a in flags if getattr(layer, a)}
    order = [chosen] + [b for b in _viable(decision, "router") if b != chosen]
    keep = next((b for b in order if b in enabled), None)
    if keep is None:  # a plain linear: the decision's own (linear, linear_fp32) or all tiers left
        keep = (
            chosen
            if chosen in ("linear", "linear_fp32")
            else next((b for b in order if b in ("linear", "linear_fp32")), chosen)
        )
    for attr in flags:
        if attr == "allow_specialized_router_gemm":  # the family gate set_out_dtype reads
            if keep in ("linear", "linear_fp32") and getattr(layer, attr):
                object.__setattr__(layer, attr, False)
        elif _router_flag_backend(attr) != keep and getattr(layer, attr):
            object.__setattr__(layer, attr, False)
    # the tiers that read out_dtype are known once it is set (GateLinear.set_out_dtype)
    if keep != chosen and getattr(layer, "out_dtype", None) is not None:
        weight = getattr(getattr(layer, "weight", None), "dtype", None)
        why = f"did not enable `{chosen}` for a gate" + (
            f" with a `{str(weight).removeprefix('torch.')}` weight" if weight is not None else ""
        )
        _fallback(decision, chosen, keep, "GateLinear", [], path="router", why=why)


def _patch_router(points: VllmPatchPoints) -> None:
    mod = importlib.import_module(points.gate_linear_module)
    cls = mod.GateLinear
    for meth in ("__init__", "set_out_dtype"):
        original = vars(cls).get(meth)
        if original is None or _wrapped(original):
            continue

        def method(self: Any, *a: Any, _o: Any = original, **kw: Any) -> Any:
            out = _o(self, *a, **kw)
            _clear_router_flags(self)
            return out

        _set(cls, meth, _mark(method, original), f"router:GateLinear.{meth}")


def _patch_auto_disable(points: VllmPatchPoints) -> None:
    utils = importlib.import_module(DG_UTILS_MODULE)
    importlib.import_module(DG_KERNEL_MODULE)  # holds a by-name copy: import it before patching
    original = utils.should_auto_disable_deep_gemm
    if _wrapped(original):
        return

    def should_auto_disable_deep_gemm(model_type: Any, *a: Any, **kw: Any) -> bool:
        decision = current_decision()
        if decision is None:
            return bool(original(model_type, *a, **kw))
        return _deep_gemm_denied(decision)

    wrapper = _mark(should_auto_disable_deep_gemm, original)
    _set(utils, "should_auto_disable_deep_gemm", wrapper, "config:should_auto_disable_deep_gemm")
    for name in dict.fromkeys((DG_KERNEL_MODULE, *points.auto_disable_importers)):
        _STATE.late_importers.append((name, "should_auto_disable_deep_gemm"))
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "should_auto_disable_deep_gemm", None) is original:
            _set(mod, "should_auto_disable_deep_gemm", wrapper, f"config:{name}")


#: vLLM's attention selector and the config step before which the operator's backend is read
#: (the same in 0.26 to 0.34: ``vllm/v1/attention/selector.py``, ``vllm/config/vllm.py``)
_SELECTOR_MODULE: Final = "vllm.v1.attention.selector"
_CONFIG_MODULE: Final = "vllm.config.vllm"


def _attention_conflict(decision: DecisionLike, operator: str, chosen: str) -> None:
    """The operator's ``--attention-backend`` stands where the decision chose another backend:
    one warning and one record in :func:`status` (strict: start-up stops)."""
    rule = getattr(decision.paths.get("attention"), "rule", None)
    why = f" (rule `{rule}`)" if rule else ""
    text = (
        f"the operator's --attention-backend `{operator}` stands, but the decision chose `{chosen}`{why}: "
        "a conflict, vLLM runs the operator's backend"
    )
    record = {"path": "attention", "operator": operator, "decided": chosen, "rule": str(rule or "")}
    with _STATE.lock:
        if record in _STATE.conflicts:
            return
        _STATE.conflicts.append(record)
    if _STATE.strict():
        raise AdapterError(f"kernelpolicy: {text} ({STRICT_ENV} is set, so start-up stops)")
    _warn(f"{text} (fingerprint={decision.fingerprint})")


def _select_attention(original: Any, config: Any, decision: DecisionLike, args: Any, kwargs: Any) -> Any:
    """vLLM's attention selector run with the decided backend (see the module docstring)."""
    from ...releases.vllm.attention import id_of
    from ._attention import apply_attention, operator_backend

    chosen = _backend(decision, "attention")
    attention_config = getattr(config, "attention_config", None)
    if chosen is None or attention_config is None or not hasattr(attention_config, "backend"):
        return original(*args, **kwargs)
    operator = operator_backend(config)
    if operator is not None:  # the operator's explicit choice wins
        if (id_of(operator) or operator.lower()) != chosen:
            _attention_conflict(decision, operator, chosen)
        return original(*args, **kwargs)
    if getattr(attention_config, "backend_per_kind", None):
        return original(*args, **kwargs)  # the operator chose per KV-cache kind: theirs
    previous = attention_config.backend
    name = apply_attention(config, decision)
    if name is None:
        attention_config.backend = previous
        result = original(*args, **kwargs)
        used = getattr(result, "get_name", lambda: None)() or "its own choice"
        _fallback(decision, chosen, f"{used} (vLLM's own)", "attention selector", [], path="attention")
        return result
    try:
        return original(*args, **kwargs)
    except _REFUSALS as exc:
        reason = message(exc)
        attention_config.backend = previous
        if _STATE.strict():
            raise AdapterError(
                f"kernelpolicy: vLLM's attention selector refused the decided backend `{chosen}` "
                f"({name}; {STRICT_ENV} is set, so start-up stops): {reason}"
            ) from exc
        result = original(*args, **kwargs)
        used = getattr(result, "get_name", lambda: None)() or "its own choice"
        _fallback(
            decision, chosen, f"{used} (vLLM's own)", "attention selector", [f"`{name}` ({reason})"], path="attention"
        )
        return result


def _patch_attention(points: VllmPatchPoints) -> None:
    """The attention selector (and its by-name copies), and the config step that keeps the
    operator's backend before vLLM's model code runs."""
    from ._attention import mark_operator_backend

    cfg = importlib.import_module(_CONFIG_MODULE)
    step = vars(cfg.VllmConfig).get("try_verify_and_update_config")
    if step is not None and not _wrapped(step):

        def try_verify_and_update_config(self: Any, *a: Any, _o: Any = step, **kw: Any) -> Any:
            mark_operator_backend(self)
            return _o(self, *a, **kw)

        _set(
            cfg.VllmConfig,
            "try_verify_and_update_config",
            _mark(try_verify_and_update_config, step),
            "attention:config",
        )
    selector = importlib.import_module(_SELECTOR_MODULE)
    original = selector.get_attn_backend
    if _wrapped(original):
        return

    def get_attn_backend(*args: Any, **kwargs: Any) -> Any:
        decision = current_decision()
        config = _vllm_config_now() if decision is not None else None
        if decision is None or config is None:
            return original(*args, **kwargs)
        return _select_attention(original, config, decision, args, kwargs)

    wrapper = _mark(get_attn_backend, original)
    _set(selector, "get_attn_backend", wrapper, "attention")
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm.") and getattr(mod, "get_attn_backend", None) is original:
            _STATE.late_importers.append((name, "get_attn_backend"))
            _set(mod, "get_attn_backend", wrapper, f"attention:{name}")


_PATCHERS: Final = (
    ("config", _patch_auto_disable),
    ("dense", _patch_dense),
    ("weight-only and FP4/MXFP8 dense", _patch_linear_tables),
    ("moe", _patch_moe),
    ("moe oracles", _patch_moe_oracles),
    ("warmup", _patch_warmup),
    ("router", _patch_router),
    ("attention", _patch_attention),
)


def _installed_vllm() -> str | None:
    mod = sys.modules.get("vllm")
    version = getattr(mod, "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return md.version("vllm")
    except md.PackageNotFoundError:
        return None


def register() -> None:
    """The ``vllm.general_plugins`` entry point: install the patches (idempotent)."""
    with _STATE.lock:
        if _STATE.registered:
            return
        if _STATE.disabled():
            logger.info("kernelpolicy: %s is set; the vLLM plugin does nothing", DISABLE_ENV)
            return
        _STATE.environ = dict(os.environ)
        version = _installed_vllm()
        points = patch_points_for(version) if version else None
        if points is None:
            _STATE.unknown_release(
                f"kernelpolicy: vLLM {version or '(not found)'} is not a release this plugin "
                f"knows ({known_span()}); no selection point is patched, vLLM decides on its own"
            )
            _STATE.registered = True
            _STATE.version = version
            return
        _STATE.version = version
        _STATE.points = points
        for label, patch in _PATCHERS:
            try:
                patch(points)
            except Exception as exc:
                text = f"kernelpolicy: could not patch the {label} selection point: {message(exc)}"
                if _STATE.strict():
                    unpatch()
                    raise AdapterError(text) from exc
                logger.warning(text)
                _STATE.warnings.append(text)
        _STATE.registered = True
        logger.debug("kernelpolicy: patched %s", ", ".join(_STATE.patched))


def status() -> dict[str, Any]:
    """What the plugin did in this process (JSON-ready): patches, decisions, warnings."""
    decisions = []
    for key, decision in _STATE.decisions.items():
        decisions.append(
            {
                "fingerprint": decision.fingerprint,
                "summary": startup_summary(decision),
                "paths": {
                    name: {"backend": _backend(decision, name), "rule": getattr(p, "rule", None)}
                    for name, p in decision.paths.items()
                    if name != "warmup"
                },
                "warmup": list(decision.warmup),
                "facts": _STATE.facts.get(key, {}),
                "policy": getattr(decision, "policy_digest", None),
            }
        )
    return {
        "registered": _STATE.registered,
        "vllm_version": _STATE.version,
        "release": _STATE.points.release if _STATE.points else None,
        "patched": list(_STATE.patched),
        "decisions": decisions,
        "fallbacks": [dict(f) for f in _STATE.fallbacks],
        "conflicts": [dict(c) for c in _STATE.conflicts],
        "warnings": list(_STATE.warnings),
    }
