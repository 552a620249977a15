"""Run a real SGLang's own kernel selection on a simulated NVIDIA GPU.

SGLang decides its FP8/FP4 kernels in Python from the device's compute capability, in two
places: resolution in the main process (``ServerArgs``, model overrides) and each scheduler's
start (``init_moe_gemm_config``, then the quant method of every layer). The probe
(``_probe.py``, run with an SGLang venv's python) runs both for many deployments in one process
per simulated GPU: ``torch.cuda`` answers with the chosen capability, and a stub
``libcuda.so.1`` (the one the vLLM harness builds, :mod:`kernelpolicy.engines._sim`) lets
SGLang's compiled extensions load without a driver.

:func:`simulate_many` returns, per deployment, :class:`SglangChoices`: the block-FP8 function a
linear layer dispatched, the runner a MoE layer got, the router tier of a DeepSeek-family gate,
SGLang's DeepGEMM switch as a scheduler reads it, and (with ``plugin=True``, the kernelpolicy
SGLang plugin loaded by SGLang's own ``load_plugins`` from this source tree) what the plugin did.
Nothing here imports SGLang or torch; the subprocess needs no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from ....releases.sglang.names import dense_ids_of_name
from ..._sim import SimulationError, build_stub_libcuda, driver_symbols_of, run_probe

__all__ = [
    "Deployment",
    "SglangChoices",
    "SimulationError",
    "default_venv_python",
    "launch_options",
    "plugin_facts",
    "simulate_many",
]

_PROBE: Final = Path(__file__).with_name("_probe.py")
#: The layer naming the probe loads beside itself (it does not import kernelpolicy).
_LINEARS: Final = Path(__file__).resolve().parents[3] / "releases" / "sglang" / "_linears.py"
_SRC_ROOT: Final = Path(__file__).resolve().parents[4]  # the folder holding `kernelpolicy/`
#: The packages of an SGLang venv whose shared objects need driver symbols from the stub.
_NATIVE_PACKAGES: Final = ("sgl_kernel", "deep_gemm", "flashinfer", "sgl_flash_mla", "deep_ep", "torch/lib")
_DROP_ENV: Final = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES", "SGLANG_PLUGINS")


def default_venv_python(version: str) -> Path:
    """Where ``kernelpolicy sglang venv VERSION`` puts that venv's python."""
    from ...._venvs import venv_python

    return venv_python(version, "sglang")


@dataclass(frozen=True)
class Deployment:
    """One deployment: a model config on a GPU, with its server args and environment."""

    config: Mapping[str, Any]
    gpu: tuple[int, int]
    gpu_name: str
    model_id: str | None = None  #: the served model name (the plugin looks the catalog up by it)
    env: Mapping[str, str] = field(default_factory=dict)
    args: Mapping[str, Any] = field(default_factory=dict)  #: ``ServerArgs`` fields beside the model
    plugin: bool = False
    moe: bool = True  #: probe a MoE layer (the model has MoE layers)


@dataclass(frozen=True)
class SglangChoices:
    """What SGLang selected for one deployment on the simulated GPU."""

    dense_method: str | None = None  #: the quant method class of a linear layer
    dense_function: str | None = None  #: the block-FP8 linear it dispatched (block FP8 only)
    moe_method: str | None = None
    moe_runner: str | None = None  #: SGLang's runner name (``triton``, ``deep_gemm``, ...)
    router: str | None = None  #: the DeepSeek-family gate's tier (``tiny_gemm``/``cublas``; None: not seen)
    deep_gemm: bool | None = None  #: SGLang's DeepGEMM switch as a scheduler reads it
    args: Mapping[str, str] = field(default_factory=dict)  #: the resolved backend fields
    errors: Mapping[str, str] = field(default_factory=dict)  #: step -> SGLang's error
    plugin: Mapping[str, Any] | None = None  #: the plugin's ``status()`` (plugin runs)

    @property
    def dense_ids(self) -> frozenset[str]:
        """The kernelpolicy dense backends the dispatched function can be (empty: not block FP8)."""
        return dense_ids_of_name(self.dense_function) if self.dense_function else frozenset()

    @property
    def attention(self) -> tuple[str | None, str | None]:
        """The attention backends SGLang resolved for prefill and decode, by its names (a phase's
        own field where set, else ``attention_backend``; ``None``: not resolved)."""

        def field(name: str) -> str | None:
            value = self.args.get(name)
            return None if value in (None, "None") else str(value)

        base = field("attention_backend")
        return field("prefill_attention_backend") or base, field("decode_attention_backend") or base

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _choices(raw: Mapping[str, Any]) -> SglangChoices:
    dense, moe = raw.get("dense") or {}, raw.get("moe") or {}
    return SglangChoices(
        dense_method=dense.get("method"),
        dense_function=dense.get("function"),
        moe_method=moe.get("method"),
        moe_runner=moe.get("runner"),
        router=(raw.get("router") or {}).get("tier"),
        deep_gemm=raw.get("deep_gemm"),
        args=dict(raw.get("args") or {}),
        errors={str(k): str(v) for k, v in (raw.get("errors") or {}).items()},
        plugin=raw.get("plugin"),
    )


_SYMBOLS: dict[str, tuple[str, ...]] = {}


def _stub_for(python: Path) -> Path:
    """The stub driver with every ``cu*`` symbol the venv's native packages import."""
    key = str(python)
    if key not in _SYMBOLS:
        found = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if not found:
            raise SimulationError(f"`{python}` is not a python that runs")
        site = Path(found)
        if not (site / "sglang").is_dir():
            raise SimulationError(f"sglang is not installed for {python}")
        symbols: set[str] = set()
        for package in _NATIVE_PACKAGES:
            symbols |= set(driver_symbols_of(site / package))
        _SYMBOLS[key] = tuple(sorted(symbols))
    return build_stub_libcuda(_SYMBOLS[key])


def _child_env(tmp: Path, stub: Path, gpu: tuple[int, int], name: str, plugin: bool) -> dict[str, str]:
    if sys.platform != "linux":  # the stub driver is an ELF shared object
        raise SimulationError("GPU simulation needs Linux")
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV and not k.startswith(("SGLANG_", "SGL_"))}
    ld = os.environ.get("LD_LIBRARY_PATH")
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(tmp / "site"), *([str(_SRC_ROOT)] if plugin else [])]),
            "LD_LIBRARY_PATH": str(stub) + (os.pathsep + ld if ld else ""),
            "KP_SIMGPU_CC": f"{gpu[0]}.{gpu[1]}",
            "KP_SIMGPU_NAME": name,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(tmp / "hf"),
            "XDG_CACHE_HOME": str(tmp / "cache"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "TRITON_CACHE_DIR": str(tmp / "triton"),
        }
    )
    if plugin:
        env["SGLANG_PLUGINS"] = "kernelpolicy"
    return env


def _write_plugin_dist(site: Path) -> None:
    """A dist-info registering the plugin under ``sglang.srt.plugins`` (what ``pip install
    kernelpolicy`` registers), so SGLang's ``load_plugins`` finds it."""
    dist = site / "kernelpolicy_sglang_probe-0.0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: kernelpolicy-sglang-probe\nVersion: 0.0.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[sglang.srt.plugins]\nkernelpolicy = kernelpolicy.engines.sglang.plugin:register\n", encoding="utf-8"
    )


def _run_group(
    python: Path, stub: Path, group: Sequence[tuple[int, Deployment]], models: Mapping[str, Path], timeout: float
) -> dict[int, SglangChoices]:
    first = group[0][1]
    tmp = Path(tempfile.mkdtemp(prefix="kp-simgpu-sglang-"))
    try:
        _write_plugin_dist(tmp / "site")
        probe = tmp / "kp_probe.py"
        shutil.copyfile(_PROBE, probe)
        shutil.copyfile(_LINEARS, tmp / "kp_linears.py")
        request = {
            "plugin": first.plugin,
            "cells": [
                {
                    "model_dir": str(models[_key(d.config)]),
                    "model_id": d.model_id,
                    "config": dict(d.config),
                    "env": dict(d.env),
                    "args": dict(d.args),
                    "moe": d.moe,
                }
                for _i, d in group
            ],
        }
        (tmp / "request.json").write_text(json.dumps(request), encoding="utf-8")
        env = _child_env(tmp, stub, first.gpu, first.gpu_name, first.plugin)
        proc, raw = run_probe(python, probe, tmp, env, timeout, label="SGLang")
        if raw.get("errors", {}).get("probe"):
            raise SimulationError(f"SGLang did not start in the probe: {raw['errors']['probe']}")
        cells = raw.get("cells") or []
        if len(cells) != len(group):
            raise SimulationError(
                f"the SGLang probe stopped after {len(cells)} of {len(group)} deployments:\n{proc.stdout[-4000:]}"
            )
        return {i: _choices(cell) for (i, _d), cell in zip(group, cells, strict=True)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _key(config: Mapping[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def plugin_facts(
    python: str | os.PathLike[str],
    gpu: tuple[int, int],
    gpu_name: str,
    lines: Sequence[Sequence[str]],
    *,
    timeout: float = 1800.0,
) -> list[dict[str, Any]]:
    """The facts (and fingerprint) the kernelpolicy plugin gathers in *python*'s SGLang for each
    launch line's flags in *lines* (``["--model-path", DIR, "--tp-size", "2", ...]``), read by
    SGLang's own argument parser into ``ServerArgs``, on a simulated GPU: one process for all.

    Each item is ``{"argv", "facts", "fingerprint", "machine", "errors"}``.

    :raises SimulationError: when the process wrote no result or SGLang did not import.
    """
    py = Path(python)
    stub = _stub_for(py)
    tmp = Path(tempfile.mkdtemp(prefix="kp-simgpu-sglang-"))
    try:
        _write_plugin_dist(tmp / "site")
        probe = tmp / "kp_probe.py"
        shutil.copyfile(_PROBE, probe)
        (tmp / "request.json").write_text(json.dumps({"parity": [list(x) for x in lines]}), encoding="utf-8")
        env = _child_env(tmp, stub, gpu, gpu_name, False)
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(_SRC_ROOT)])  # kernelpolicy, not as a plugin
        proc, raw = run_probe(py, probe, tmp, env, timeout, label="SGLang")
        if raw.get("errors", {}).get("probe"):
            raise SimulationError(f"SGLang did not start in the probe: {raw['errors']['probe']}")
        cells = list(raw.get("cells") or ())
        if len(cells) != len(lines):
            stopped = f"the SGLang probe stopped after {len(cells)} of {len(lines)} lines"
            raise SimulationError(f"{stopped}:\n{proc.stdout[-4000:]}")
        return cells
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def launch_options(python: str | os.PathLike[str], *, timeout: float = 600.0) -> dict[str, str]:
    """Every option string of the launch parser of *python*'s SGLang (as ``prepare_server_args``
    builds it) -> its argparse ``dest``: what the release scan read from the wheel
    (``releases/sglang/options.json``) must be this.

    :raises SimulationError: when the process wrote no result or SGLang did not import.
    """
    py = Path(python)
    stub = _stub_for(py)
    tmp = Path(tempfile.mkdtemp(prefix="kp-simgpu-sglang-"))
    try:
        probe = tmp / "kp_probe.py"
        shutil.copyfile(_PROBE, probe)
        (tmp / "request.json").write_text(json.dumps({"options": True, "cells": []}), encoding="utf-8")
        env = _child_env(tmp, stub, (9, 0), "NVIDIA H100", False)
        _proc, raw = run_probe(py, probe, tmp, env, timeout, label="SGLang")
        errors = raw.get("errors") or {}
        if errors or not isinstance(raw.get("options"), dict):
            raise SimulationError(f"SGLang's launch parser was not read: {errors}")
        return dict(raw["options"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def simulate_many(
    python: str | os.PathLike[str],
    deployments: Sequence[Deployment],
    *,
    timeout: float = 1800.0,
    jobs: int | None = None,
) -> list[SglangChoices]:
    """SGLang's choices for each deployment, in order.

    One probe process per (GPU, plugin or not): SGLang is imported once per simulated GPU and
    the plugin registers its hooks once; up to *jobs* processes run at a time (default: the
    CPU count, at most 4).

    :raises SimulationError: when a probe wrote no result or SGLang did not import.
    """
    if not deployments:
        return []
    py = Path(python)
    stub = _stub_for(py)
    groups: dict[tuple[tuple[int, int], str, bool], list[tuple[int, Deployment]]] = {}
    for i, d in enumerate(deployments):
        groups.setdefault((d.gpu, d.gpu_name, d.plugin), []).append((i, d))
    models_dir = Path(tempfile.mkdtemp(prefix="kp-model-"))
    try:
        models: dict[str, Path] = {}
        for d in deployments:
            key = _key(d.config)
            if key not in models:
                folder = models_dir / f"m{len(models)}"
                folder.mkdir()
                (folder / "config.json").write_text(json.dumps(dict(d.config)), encoding="utf-8")
                models[key] = folder
        workers = jobs or min(4, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = [pool.submit(_run_group, py, stub, group, models, timeout) for group in groups.values()]
            found: dict[int, SglangChoices] = {}
            for future in futures:
                found.update(future.result())
        return [found[i] for i in range(len(deployments))]
    finally:
        shutil.rmtree(models_dir, ignore_errors=True)
