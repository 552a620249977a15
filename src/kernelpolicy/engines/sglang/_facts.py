"""Facts about a running SGLang process, read from its server args, platform and packages.

These are the *derived* layer of the one fact pipeline (:mod:`kernelpolicy.facts.pipeline`):
the environment variables rules read, ``KERNELPOLICY_FACTS`` and the defaults are added there,
exactly as ``kernelpolicy explain`` adds them.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ...facts.model import CatalogModel
    from ...policy import EngineMap

__all__ = ["explicit_backends", "facts_from_sglang", "gpu_facts", "moe_ids_of", "package_facts"]

_PACKAGES: Final = (
    ("sglang", "sglang"),
    ("torch", "torch"),
    ("triton", "triton"),
    ("flashinfer", "flashinfer-python"),
    ("cutlass_dsl", "nvidia-cutlass-dsl"),
)


def package_facts() -> dict[str, object]:
    """Installed versions of SGLang's kernel packages and the DeepGEMM build it would load."""
    from ...facts.providers._deep_gemm import find_builds, in_use

    values: dict[str, object] = {}
    for key, dist in _PACKAGES:
        try:
            values[f"{key}.version"] = md.version(dist)
        except md.PackageNotFoundError:
            continue
    build = in_use(*find_builds())
    values["deep_gemm.source"] = build.source if build is not None else "none"
    if build is not None:
        for key, value in (
            ("dist", build.dist),
            ("version", build.version),
            ("commit", build.commit),
            ("has_sm120_sf_layout", build.has_sm120_sf_layout),
        ):
            if value is not None:
                values[f"deep_gemm.{key}"] = value
    return values


def gpu_facts() -> dict[str, object]:
    """The GPU of this process, as torch reports it (nothing when there is none)."""
    from ...facts.gpu import facts_from_capability

    try:
        import torch

        if not torch.cuda.is_available():
            return {}
        major, minor = torch.cuda.get_device_capability()
        name = str(torch.cuda.get_device_name())
    except Exception:  # no torch, or no usable CUDA
        return {}
    return facts_from_capability(int(major), int(minor), name)


def moe_ids_of(engine: EngineMap) -> dict[str, frozenset[str]]:
    """SGLang MoE runner name -> the kernelpolicy ids it can be (the vocabulary read backwards:
    ``moe_flag``, ``moe_flag_by_scheme`` and the MoE aliases). ``flashinfer_mxfp4`` is FlashInfer's
    CUTLASS or TRT-LLM kernel, by GPU."""
    out: dict[str, set[str]] = {}
    pairs = [*engine.moe_flag.items(), *(p for m in engine.moe_flag_by_scheme.values() for p in m.items())]
    for kp, flag in pairs:
        out.setdefault(flag, set()).add(kp)
    for name, kp in engine.aliases.get("moe", {}).items():
        out.setdefault(name, set()).add(kp)
    return {name: frozenset(ids) for name, ids in out.items()}


def explicit_backends(server_args: Any, engine: EngineMap) -> dict[str, str]:
    """The backends the operator named with SGLang's flags, as kernelpolicy ids.

    ``auto`` and names kernelpolicy has no id for (SGLang's own ``cutlass`` MoE, say) are left
    out: the decision then decides that path, and the plugin does not touch the operator's value.
    """
    out: dict[str, str] = {}
    moe = str(getattr(server_args, "moe_runner_backend", "auto") or "auto")
    moe_ids = moe_ids_of(engine)
    if moe != "auto" and len(moe_ids.get(moe, ())) == 1:  # a name of two ids says neither
        (out["deploy.moe_backend"],) = moe_ids[moe]
    dense_ids = {names[0]: kp for kp, names in engine.dense_kernels.items() if names} | dict(
        engine.aliases.get("dense", {})
    )
    for field in ("fp8_gemm_runner_backend", "fp4_gemm_runner_backend"):
        value = str(getattr(server_args, field, "auto") or "auto")
        if value != "auto" and value in dense_ids:
            out["deploy.linear_backend"] = dense_ids[value]
    return out


def facts_from_sglang(
    server_args: Any,
    engine: EngineMap,
    catalog: Sequence[CatalogModel] = (),
    *,
    gpu: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Fact values for this process's platform and *server_args* (SGLang's ``ServerArgs``).

    :param gpu: the GPU's facts when known otherwise (a simulated GPU); else torch is asked.
    """
    from ...facts.keys import lookup_key
    from ...facts.model import facts_from_config, locate_model

    values: dict[str, object] = dict(gpu) if gpu is not None else gpu_facts()
    machine = platform.machine()
    if machine in ("x86_64", "aarch64"):
        values["host.machine"] = machine
    values.update(package_facts())
    model = str(getattr(server_args, "model_path", "") or "")
    if model:
        found = locate_model(model, catalog)
        values.update(facts_from_config(found.config))
        values.update(found.facts)
    tp = int(getattr(server_args, "tp_size", 1) or 1)
    values["deploy.tp"] = tp
    values["deploy.ep"] = int(getattr(server_args, "ep_size", 1) or 1)
    a2a = str(getattr(server_args, "moe_a2a_backend", "none") or "none")
    if a2a != "none":  # SGLang's name (`deepep`, `mooncake`, ...): its rules name it so
        values["deploy.all2all"] = a2a
    values.update(explicit_backends(server_args, engine))
    return {k: v for k, v in values.items() if lookup_key(k) is not None}
