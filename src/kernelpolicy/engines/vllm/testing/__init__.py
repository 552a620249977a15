"""Run a real vLLM's own kernel selection code on a simulated NVIDIA GPU.

vLLM decides its FP8 kernels in Python, from the device's compute capability. This module makes
that code run on a machine without a GPU:

- a stub ``libcuda.so.1`` (C generated here, compiled with gcc, cached by content hash) whose
  every driver entry point returns ``CUDA_ERROR_NO_DEVICE``, so vLLM's compiled extensions load
  and answer capability queries;
- an out-of-tree platform registered under ``vllm.platform_plugins`` (a temporary
  ``*.dist-info`` on ``PYTHONPATH``) that subclasses ``CudaPlatformBase`` and reports the chosen
  compute capability.

:func:`simulate` runs the probe (``_probe.py``) with a given venv's python in a subprocess and
returns :class:`NativeChoices`: per path, what vLLM itself selected. With ``plugin=True`` the
kernelpolicy vLLM plugin is active in that subprocess (from this source tree). Nothing here
imports vLLM or torch; the subprocess binds nothing but 127.0.0.1 and needs no network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from ....releases.vllm.names import dense_id_of, moe_id_of, oracle_moe_id_of
from ..._sim import (
    PLATFORM_PLUGIN_NAME,
    SimulationError,
    build_stub_libcuda,
    driver_symbols_of,
    run_probe,
    write_plugin_dir,
)

__all__ = [
    "AttentionChoice",
    "DenseChoice",
    "Deployment",
    "KernelVerdict",
    "MoeChoice",
    "NativeChoices",
    "PluginCost",
    "RouterChoice",
    "SimulationError",
    "WarmupChoice",
    "default_venv_python",
    "parse_gpu",
    "parser_options",
    "plugin_cost",
    "plugin_facts",
    "simulate",
    "simulate_many",
]

_PROBE: Final = Path(__file__).with_name("_probe.py")
_SRC_ROOT: Final = Path(__file__).resolve().parents[4]  # the folder holding `kernelpolicy/`
_NAMES: Final = {
    (8, 0): "NVIDIA A100",
    (8, 9): "NVIDIA L40S",
    (9, 0): "NVIDIA H100",
    (10, 0): "NVIDIA B200",
    (10, 3): "NVIDIA B300",
    (11, 0): "NVIDIA Jetson Thor",
    (12, 0): "NVIDIA RTX PRO 6000 Blackwell",
    (12, 1): "NVIDIA GB10",
}
_CC: Final = re.compile(r"\A(?:sm_?)?(\d{1,2})(?:\.(\d)|(\d))\Z", re.I)


def parse_gpu(spec: str | tuple[int, int] | Sequence[int]) -> tuple[int, int]:
    """``(major, minor)`` from ``sm121``, ``12.1``, ``121``, ``(12, 1)`` or a product name."""
    if not isinstance(spec, str):
        major, minor = (int(x) for x in spec)
        return major, minor
    match = _CC.match(spec.strip())
    if match:
        return int(match.group(1)), int(match.group(2) or match.group(3))
    from ....facts.gpu import facts_from_spec  # product names come from the shipped catalog

    facts = facts_from_spec(spec)
    major_s, minor_s = str(facts["gpu.cc"]).split(".")
    return int(major_s), int(minor_s)


def default_venv_python(version: str) -> Path:
    """Where ``scripts/vllm-venv.sh VERSION`` puts that venv's python."""
    from ...._venvs import venv_python

    return venv_python(version, "vllm")


@dataclass(frozen=True)
class KernelVerdict:
    """One dense kernel class as vLLM's ``is_supported_and_can_implement_kernel`` judged it."""

    name: str
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class DenseChoice:
    kernel: str | None  #: the kernel class ``init_fp8_linear_kernel`` built
    scheme: str | None  #: ``block``, ``channel``, ``tensor`` or ``none``
    fallback: str | None = None  #: the fallback kernel of a dynamic wrapper
    weight_shape: tuple[int, ...] = ()
    candidates: tuple[KernelVerdict, ...] = ()

    @property
    def backend(self) -> str | None:
        """The engine-neutral dense id of :attr:`kernel`."""
        return dense_id_of(self.kernel)

    @property
    def uses_deep_gemm(self) -> bool:
        names = {self.kernel, self.fallback}
        return bool(names & {"DeepGemmFp8BlockScaledMMKernel"}) or (
            self.kernel == "FlashInferFp8DeepGEMMDynamicBlockScaledKernel"
        )

    def verdict(self, name: str) -> KernelVerdict | None:
        return next((c for c in self.candidates if c.name == name), None)


@dataclass(frozen=True)
class MoeChoice:
    backend: str | None  #: the oracle's backend member name, e.g. ``DEEPGEMM``, ``MARLIN``
    experts: str | None  #: the experts class it returned
    via: str | None = None  #: the module (or module.function) of the oracle that was called
    reason: str | None = None  #: why there is no MoE choice (no MoE layers, not FP8)
    #: the experts' scheme, which names the oracle: ``fp8`` (``select_fp8_moe_backend``),
    #: ``mxfp4``, ``mxfp8`` or ``nvfp4``
    scheme: str | None = None

    @property
    def backend_id(self) -> str | None:
        if self.scheme in ("mxfp4", "mxfp8", "nvfp4"):
            return oracle_moe_id_of(self.scheme, self.backend)
        return moe_id_of(self.backend)


@dataclass(frozen=True)
class WarmupChoice:
    gate: bool | None  #: kernel_warmup's DeepGEMM gate (env, support, VLLM_DEEP_GEMM_WARMUP)
    dense: bool | None  #: a dense layer of the model would be warmed with DeepGEMM
    moe: bool | None  #: a MoE layer of the model would be warmed with DeepGEMM

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(k for k, on in (("deep_gemm.dense", self.dense), ("deep_gemm.moe", self.moe)) if on)

    def warmed(self, dense: str | None) -> tuple[str, ...]:
        """:attr:`kernels` as decision ids: the dense DeepGEMM warmup warms the FlashInfer
        DeepGEMM kernel's DeepGEMM when that is the dense kernel."""
        prefix = "flashinfer_deep_gemm" if dense == "flashinfer_deep_gemm" else "deep_gemm"
        return tuple(f"{prefix}.dense" if k == "deep_gemm.dense" else k for k in self.kernels)


@dataclass(frozen=True)
class RouterChoice:
    cls: str | None  #: the class a ``GateLinear(...)`` call built (an OOT subclass shows here)
    backend: str | None  #: the highest tier the flags allow, as a router id
    flags: Mapping[str, bool] = field(default_factory=dict)
    weight_dtype: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class AttentionChoice:
    """What vLLM's attention selector returned for the model's decoder layers."""

    backend: str | None  #: the backend's name (``AttentionBackendEnum`` member: ``FLASHINFER_MLA``)
    cls: str | None = None  #: the backend class
    use_mla: bool | None = None
    has_sink: bool | None = None
    use_sparse: bool | None = None
    has_sliding_window: bool | None = None
    config_backend: str | None = None  #: ``attention_config.backend`` after the selection

    @property
    def backend_id(self) -> str | None:
        """kernelpolicy's attention id for :attr:`backend` (``None``: a backend it has no id for)."""
        from ....releases.vllm.attention import id_of

        return id_of(self.backend)


@dataclass(frozen=True)
class NativeChoices:
    """What one vLLM selected on each path, for one simulated GPU and model config."""

    gpu_cc: tuple[int, int]
    vllm_version: str | None
    platform: str | None
    model_type: str | None
    dense: DenseChoice | None
    moe: MoeChoice | None
    warmup: WarmupChoice | None
    router: RouterChoice | None
    auto_disable_warning: str | None
    quant_use_deep_gemm: bool | None
    deep_gemm: Mapping[str, Any]
    plugin: Mapping[str, Any] | None
    env: Mapping[str, str]
    moe_backend: str | None
    errors: Mapping[str, str]
    log_lines: tuple[str, ...]
    output: str  #: the subprocess's stdout and stderr, for debugging
    returncode: int
    elapsed_s: float
    attention: AttentionChoice | None = None

    @property
    def ok(self) -> bool:
        """The probe ran every step without an error, the attention step apart: vLLM imports some
        attention backends' modules only to select them, and the CUTLASS MLA module asks for a
        driver the simulation does not have (its error stays in :attr:`errors`; :attr:`attention`
        is then ``None``)."""
        return not {k for k in self.errors if k != "attention"} and self.returncode == 0

    def backends(self) -> dict[str, str | None]:
        """Engine-neutral ids per path (warmup as a comma list of kernels, or ``""``)."""
        return {
            "dense": self.dense.backend if self.dense else None,
            "moe": self.moe.backend_id if self.moe else None,
            "router": self.router.backend if self.router else None,
            "warmup": ",".join(self.warmup.warmed(self.dense.backend if self.dense else None)) if self.warmup else None,
            "attention": self.attention.backend_id if self.attention else None,
        }

    def divergences(self) -> list[str]:
        """Places where one path runs a kernel another path of the same process refused."""
        out: list[str] = []
        dense_dg_denied: str | None = None
        if self.dense is not None:
            verdict = self.dense.verdict("DeepGemmFp8BlockScaledMMKernel")
            if verdict is not None and not verdict.ok and "model" in verdict.reason.lower():
                dense_dg_denied = verdict.reason.strip()
        if dense_dg_denied is None and self.auto_disable_warning:
            dense_dg_denied = self.auto_disable_warning
        moe_dg = self.moe is not None and self.moe.backend_id == "deep_gemm"
        if dense_dg_denied and moe_dg:
            out.append(
                f"moe runs DEEPGEMM ({self.moe.experts if self.moe else '?'}) while the dense "
                f"path refused DeepGEMM for this model: {dense_dg_denied}"
            )
        if self.warmup is not None:
            if self.warmup.moe and not moe_dg:
                out.append("warmup warms deep_gemm.moe but the MoE path does not run DeepGEMM")
            if self.warmup.dense and not (self.dense and self.dense.uses_deep_gemm):
                out.append("warmup warms deep_gemm.dense but the dense path does not run DeepGEMM")
            if dense_dg_denied and self.warmup.moe:
                out.append("warmup JIT-compiles DeepGEMM for MoE although DeepGEMM was refused")
        # the BF16x3 kernels: tcgen05 on sm100/sm103, WGMMA on sm90 (vLLM 0.34 on); none for sm_12x
        if self.router is not None and self.router.backend == "bf16x3" and self.gpu_cc[0] not in (9, 10):
            out.append("router enables the BF16x3 CuteDSL kernel outside sm90 and sm100/sm103")
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["backends"] = self.backends()
        data["divergences"] = self.divergences()
        data.pop("output")
        return data


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _from_result(
    raw: Mapping[str, Any],
    *,
    gpu_cc: tuple[int, int],
    env: Mapping[str, str],
    moe_backend: str | None,
    output: str,
    returncode: int,
    elapsed: float,
) -> NativeChoices:
    dense_raw = raw.get("dense")
    dense = None
    if isinstance(dense_raw, Mapping):
        dense = DenseChoice(
            kernel=dense_raw.get("kernel"),
            scheme=dense_raw.get("scheme"),
            fallback=dense_raw.get("fallback"),
            weight_shape=tuple(int(x) for x in dense_raw.get("weight_shape") or ()),
            candidates=tuple(
                KernelVerdict(str(c["name"]), bool(c["ok"]), str(c.get("reason") or ""))
                for c in dense_raw.get("candidates") or ()
            ),
        )
    moe_raw = raw.get("moe")
    moe = None
    if isinstance(moe_raw, Mapping):
        moe = MoeChoice(
            backend=moe_raw.get("backend"),
            experts=moe_raw.get("experts"),
            via=moe_raw.get("via"),
            reason=moe_raw.get("reason"),
            scheme=moe_raw.get("scheme"),
        )
    warm_raw = raw.get("warmup")
    warmup = None
    if isinstance(warm_raw, Mapping):
        warmup = WarmupChoice(warm_raw.get("gate"), warm_raw.get("dense"), warm_raw.get("moe"))
    router_raw = raw.get("router")
    router = None
    if isinstance(router_raw, Mapping):
        router = RouterChoice(
            cls=router_raw.get("cls"),
            backend=router_raw.get("backend"),
            flags={str(k): bool(v) for k, v in _mapping(router_raw.get("flags")).items()},
            weight_dtype=router_raw.get("weight_dtype"),
            reason=router_raw.get("reason"),
        )
    attention_raw = raw.get("attention")
    attention = None
    if isinstance(attention_raw, Mapping):
        attention = AttentionChoice(
            backend=attention_raw.get("backend"),
            cls=attention_raw.get("cls"),
            use_mla=attention_raw.get("use_mla"),
            has_sink=attention_raw.get("has_sink"),
            use_sparse=attention_raw.get("use_sparse"),
            has_sliding_window=attention_raw.get("has_sliding_window"),
            config_backend=attention_raw.get("config_backend"),
        )
    return NativeChoices(
        attention=attention,
        gpu_cc=gpu_cc,
        vllm_version=raw.get("vllm_version"),
        platform=raw.get("platform"),
        model_type=raw.get("model_type"),
        dense=dense,
        moe=moe,
        warmup=warmup,
        router=router,
        auto_disable_warning=raw.get("auto_disable_warning"),
        quant_use_deep_gemm=raw.get("quant_use_deep_gemm"),
        deep_gemm=_mapping(raw.get("deep_gemm")),
        plugin=_mapping(raw["plugin"]) if isinstance(raw.get("plugin"), Mapping) else None,
        env=dict(env),
        moe_backend=moe_backend,
        errors={str(k): str(v) for k, v in _mapping(raw.get("errors")).items()},
        log_lines=tuple(str(x) for x in raw.get("log_lines") or ()),
        output=output,
        returncode=returncode,
        elapsed_s=elapsed,
    )


_SYMBOLS_CACHE: dict[str, tuple[str, ...]] = {}


def _vllm_dir(python: Path) -> Path | None:
    code = (
        "import importlib.util, json; s = importlib.util.find_spec('vllm'); "
        "print(json.dumps(list(s.submodule_search_locations) if s else []))"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise SimulationError(f"{python} cannot look for vllm: {proc.stderr.strip()}")
    dirs = json.loads(proc.stdout.strip().splitlines()[-1])
    return Path(dirs[0]) if dirs else None


def _stub_for(python: Path) -> Path:
    key = str(python)
    if key not in _SYMBOLS_CACHE:
        vllm_dir = _vllm_dir(python)
        if vllm_dir is None:
            raise SimulationError(f"vllm is not installed for {python}")
        _SYMBOLS_CACHE[key] = driver_symbols_of(vllm_dir)
    return build_stub_libcuda(_SYMBOLS_CACHE[key])


def simulate(  # noqa: PLR0913 (predates the lint; split in a follow-up)
    python: str | os.PathLike[str],
    gpu: str | tuple[int, int] | Sequence[int],
    config: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    moe_backend: str | None = None,
    plugin: bool = False,
    facts: Mapping[str, object] | None = None,
    router_dtype: str | None = None,
    dense_shape: tuple[int, int] | None = None,
    gpu_name: str | None = None,
    timeout: float = 300.0,
    keep: bool = False,
) -> NativeChoices:
    """Run vLLM's own selectors in *python* (a venv with vLLM) for one GPU and model config.

    :param config: the model's HF ``config.json`` as a mapping (with ``quantization_config``).
    :param env: extra environment for the vLLM process (``VLLM_USE_DEEP_GEMM``, ...).
    :param moe_backend: ``--moe-backend`` (``KernelConfig.moe_backend``), vLLM's own names.
    :param plugin: load the kernelpolicy vLLM plugin from this source tree in that process.
    :param facts: extra kernelpolicy facts for the plugin (``KERNELPOLICY_FACTS``).
    :param router_dtype: dtype of the probed ``GateLinear`` weight; default ``float32``
        (what vLLM allocates when a model passes no ``params_dtype``).
    :param keep: keep the temporary folder (its path is in the output) for debugging.
    :raises SimulationError: when the probe produced no result (bad python, timeout, crash).
    """
    py = Path(python)
    cc = parse_gpu(gpu)
    started = time.monotonic()
    stub = _stub_for(py)
    tmp = Path(tempfile.mkdtemp(prefix="kp-simgpu-"))
    try:
        plugin_dir = write_plugin_dir(tmp / "site", kernelpolicy_plugin=plugin)
        probe = tmp / "kp_probe.py"
        shutil.copyfile(_PROBE, probe)
        request = {
            "libcuda": str(stub / "libcuda.so.1"),
            "config": dict(config),
            "moe_backend": moe_backend,
            "router_dtype": router_dtype,
            "dense_shape": list(dense_shape) if dense_shape else None,
        }
        (tmp / "request.json").write_text(json.dumps(request), encoding="utf-8")
        child = _child_env(tmp, plugin_dir, stub, cc, gpu_name or _NAMES.get(cc), plugin, env or {}, facts)
        proc, raw = run_probe(py, probe, tmp, child, timeout, label="vLLM")
        output = proc.stdout + (f"\n[kept {tmp}]" if keep else "")
        return _from_result(
            raw,
            gpu_cc=cc,
            env=env or {},
            moe_backend=moe_backend,
            output=output,
            returncode=proc.returncode,
            elapsed=time.monotonic() - started,
        )
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Deployment:
    """One deployment for :func:`simulate_many`: a model config on a GPU, with its options."""

    config: Mapping[str, Any]
    gpu: tuple[int, int]
    gpu_name: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    moe_backend: str | None = None
    plugin: bool = False
    facts: Mapping[str, object] | None = None
    router_dtype: str | None = None
    model_id: str | None = None  #: the served model name (the plugin looks the catalog up by it)
    #: vLLM flag values by ``dest`` the config is built with (``dtype``, ``max_num_batched_tokens``)
    serve: Mapping[str, Any] = field(default_factory=dict)

    def request(self) -> dict[str, Any]:
        return {
            "config": dict(self.config),
            "gpu": list(self.gpu),
            "gpu_name": self.gpu_name or _NAMES.get(self.gpu),
            "env": dict(self.env),
            "moe_backend": self.moe_backend,
            "plugin": self.plugin,
            "facts": dict(self.facts) if self.facts else None,
            "router_dtype": self.router_dtype,
            "model_id": self.model_id,
            "serve": dict(self.serve),
        }


def simulate_many(
    python: str | os.PathLike[str],
    deployments: Sequence[Deployment],
    *,
    timeout: float = 1800.0,
) -> list[NativeChoices]:
    """:func:`simulate` for many deployments in one process of *python* (vLLM imported once).

    The simulated GPU changes between deployments (the platform answers with the current
    deployment's capability, vLLM's memoised answers are cleared), and so does the process
    environment; the kernelpolicy plugin is registered afresh for each deployment with
    ``plugin=True`` and taken out for the others.

    :raises SimulationError: when the process wrote no result or vLLM did not import.
    """
    if not deployments:
        return []
    started = time.monotonic()
    first = deployments[0]
    request = {"cells": [d.request() for d in deployments]}
    proc, raw = _one_process(Path(python), request, first.gpu, first.gpu_name, timeout)
    if raw.get("errors", {}).get("probe") and not raw.get("cells"):
        raise SimulationError(f"vLLM did not start in the probe: {raw['errors']['probe']}")
    elapsed = (time.monotonic() - started) / len(deployments)
    out = []
    for d, cell in zip(deployments, raw.get("cells") or (), strict=False):
        out.append(
            _from_result(
                cell,
                gpu_cc=d.gpu,
                env=d.env,
                moe_backend=d.moe_backend,
                output="",
                returncode=proc.returncode,
                elapsed=elapsed,
            )
        )
    if len(out) != len(deployments):
        raise SimulationError(
            f"the vLLM probe stopped after {len(out)} of {len(deployments)} deployments:\n{proc.stdout[-4000:]}"
        )
    return out


def plugin_facts(
    python: str | os.PathLike[str],
    gpu: tuple[int, int],
    lines: Sequence[Sequence[str]],
    *,
    gpu_name: str | None = None,
    timeout: float = 1800.0,
) -> list[dict[str, Any]]:
    """The facts (and fingerprint) the kernelpolicy plugin gathers in *python*'s vLLM for each
    serve line's flags in *lines* (``["--model", DIR, "-tp", "2", ...]``), read by vLLM's own
    argument parser into the ``VllmConfig`` it builds, on a simulated GPU: one process for all.

    Each item is ``{"argv", "facts", "fingerprint", "errors"}``.

    :raises SimulationError: when the process wrote no result or vLLM did not import.
    """
    request = {"parity": [{"argv": list(line)} for line in lines], "gpu": list(gpu), "gpu_name": gpu_name}
    proc, raw = _one_process(Path(python), request, gpu, gpu_name, timeout)
    if raw.get("errors", {}).get("probe") and not raw.get("cells"):
        raise SimulationError(f"vLLM did not start in the probe: {raw['errors']['probe']}\n{proc.stdout[-4000:]}")
    cells = list(raw.get("cells") or ())
    if len(cells) != len(lines):
        raise SimulationError(
            f"the vLLM probe stopped after {len(cells)} of {len(lines)} lines:\n{proc.stdout[-4000:]}"
        )
    return cells


def parser_options(
    python: str | os.PathLike[str], *, gpu: tuple[int, int] = (9, 0), timeout: float = 900.0
) -> dict[str, str]:
    """Every option string of the serve-line parser of *python*'s vLLM -> its ``dest``, read
    from the parser vLLM builds (on a simulated GPU: building it needs a platform).

    :raises SimulationError: when the process wrote no options or vLLM did not import.
    """
    request = {"parity": [], "options": True, "gpu": list(gpu), "gpu_name": None}
    proc, raw = _one_process(Path(python), request, gpu, None, timeout)
    options = raw.get("options")
    if not isinstance(options, dict) or not options:
        problem = raw.get("errors", {}).get("options") or raw.get("errors", {}).get("probe") or "no options"
        raise SimulationError(f"vLLM's parser options could not be read: {problem}\n{proc.stdout[-4000:]}")
    return {str(k): str(v) for k, v in options.items()}


@dataclass(frozen=True)
class PluginCost:
    """What kernelpolicy's plugin adds to one model's start-up in vLLM (:func:`plugin_cost`)."""

    vllm_version: str
    layers: int
    off_s: tuple[float, ...]  #: start-up rounds without the plugin (seconds)
    on_s: tuple[float, ...]  #: start-up rounds with it, alternating with those without
    setup_s: float  #: importing vLLM (with the simulated platform) in the same process
    import_s: float  #: importing the plugin and kernelpolicy, once per process
    per_point_s: float  #: one selection point's time in the plugin once the decision is made
    startup_calls: Mapping[str, int]  #: calls into kernelpolicy during one start-up, by function
    step_calls: Mapping[str, int]  #: calls into kernelpolicy during the simulated forward step
    step: Mapping[str, Any]  #: what the step ran
    patched: tuple[str, ...]  #: the selection points the plugin wrapped
    #: for each object the forward pass calls (kernels, experts, router): its methods that are
    #: kernelpolicy's code or wrapped by it
    reaches: Mapping[str, tuple[str, ...]]

    def calls_to(self, qualname: str) -> int:
        """Calls into kernelpolicy's function *qualname* (``module.Class.function``) at start-up."""
        return int(self.startup_calls.get(qualname, 0))


def plugin_cost(
    python: str | os.PathLike[str],
    gpu: str | tuple[int, int] | Sequence[int],
    config: Mapping[str, Any],
    *,
    layers: int = 60,
    rounds: int = 5,
    tokens: int = 8,
    model_id: str | None = None,
    timeout: float = 1800.0,
) -> PluginCost:
    """Time the start-up of a *layers*-layer model (its ``VllmConfig``, then every layer's FP8
    linear kernels, MoE backend, router gate and DeepGEMM warmup gates) in *python*'s vLLM
    without and with kernelpolicy's plugin, alternating for *rounds* rounds; then count the
    calls into kernelpolicy during one start-up and during a simulated forward step.

    :raises SimulationError: when the probe wrote no result or the start-up failed.
    """
    cc = parse_gpu(gpu)
    request = {
        "config": dict(config),
        "gpu": list(cc),
        "model_id": model_id,
        "bench": {"layers": layers, "rounds": rounds, "tokens": tokens},
    }
    proc, raw = _one_process(Path(python), request, cc, None, timeout)
    if raw.get("errors") or "times" not in raw:
        raise SimulationError(f"the start-up benchmark failed: {raw.get('errors')}\n{proc.stdout[-4000:]}")
    return PluginCost(
        vllm_version=str(raw["vllm_version"]),
        layers=layers,
        off_s=tuple(raw["times"]["off"]),
        on_s=tuple(raw["times"]["on"]),
        setup_s=float(raw["setup_s"]),
        import_s=float(raw["import_s"]),
        per_point_s=float(raw["per_point_s"]),
        startup_calls=dict(raw["startup_calls"]),
        step_calls=dict(raw["step_calls"]),
        step=dict(raw["step"]),
        patched=tuple(raw["patched"]),
        reaches={k: tuple(v) for k, v in raw["reaches"].items()},
    )


def _one_process(
    py: Path, request: Mapping[str, Any], gpu: tuple[int, int], gpu_name: str | None, timeout: float
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run the probe once on *request* (``cells`` or ``bench``), the plugin importable from this
    source tree and registered by the probe itself."""
    stub = _stub_for(py)
    tmp = Path(tempfile.mkdtemp(prefix="kp-simgpu-"))
    try:
        plugin_dir = write_plugin_dir(tmp / "site", kernelpolicy_plugin=False)
        probe = tmp / "kp_probe.py"
        shutil.copyfile(_PROBE, probe)
        (tmp / "request.json").write_text(
            json.dumps({"libcuda": str(stub / "libcuda.so.1"), **request}), encoding="utf-8"
        )
        child = _child_env(tmp, plugin_dir, stub, gpu, gpu_name or _NAMES.get(gpu), True, {}, None)
        child["VLLM_PLUGINS"] = PLATFORM_PLUGIN_NAME  # the probe registers kernelpolicy's plugin itself
        return run_probe(py, probe, tmp, child, timeout, label="vLLM")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_DROP_ENV: Final = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES")


def _child_env(
    tmp: Path,
    plugin_dir: Path,
    stub: Path,
    cc: tuple[int, int],
    name: str | None,
    plugin: bool,
    extra: Mapping[str, str],
    facts: Mapping[str, object] | None,
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV and not k.startswith("VLLM_")}
    path = [str(plugin_dir)] + ([str(_SRC_ROOT)] if plugin else [])
    ld = os.environ.get("LD_LIBRARY_PATH")
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(path),
            "LD_LIBRARY_PATH": str(stub) + (os.pathsep + ld if ld else ""),
            "KP_SIMGPU_CC": f"{cc[0]}.{cc[1]}",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(tmp / "hf"),
            "VLLM_CACHE_ROOT": str(tmp / "vllm-cache"),
            "VLLM_CONFIG_ROOT": str(tmp / "vllm-config"),
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "VLLM_HOST_IP": "127.0.0.1",
            "MASTER_ADDR": "127.0.0.1",
            "GLOO_SOCKET_IFNAME": "lo",
            "VLLM_LOGGING_LEVEL": "INFO",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    if name:
        env["KP_SIMGPU_NAME"] = name
    if facts:
        env["KERNELPOLICY_FACTS"] = json.dumps(dict(facts), default=str)
    env.update(extra)
    wanted = [PLATFORM_PLUGIN_NAME] + (["kernelpolicy"] if plugin else [])
    if "VLLM_PLUGINS" in extra:
        wanted += [p for p in extra["VLLM_PLUGINS"].split(",") if p and p not in wanted]
    env["VLLM_PLUGINS"] = ",".join(wanted)
    if sys.platform != "linux":  # the stub driver is an ELF shared object
        raise SimulationError("GPU simulation needs Linux")
    return env
