"""Facts about a running SGLang process, read from its server args, platform and packages.

These are the *derived* layer of the one fact pipeline (:mod:`kernelpolicy.deployment.pipeline`):
the environment variables rules read, ``KERNELPOLICY_FACTS`` and the defaults are added there,
exactly as ``kernelpolicy explain`` adds them.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ...releases.sglang.flags import FLAGS, facts_of
from ...releases.table import config_values

if TYPE_CHECKING:
    from ...facts.model import CatalogModel
    from ...policy import EngineMap

__all__ = ["facts_from_sglang", "gpu_facts", "package_facts"]

#: the packages whose versions the plugin reads (keys of the facts providers' table)
_PACKAGES: Final = ("sglang", "torch", "triton", "flashinfer", "cutlass_dsl")


def package_facts() -> dict[str, object]:
    """Installed versions of SGLang's kernel packages and the DeepGEMM build it would load
    (metadata and files only, like vLLM's plugin reads them)."""
    from ...facts.providers import installed

    return installed(_PACKAGES)


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
        values.update(found.facts or _served_catalog_facts(server_args, catalog))
    values.update(facts_of(config_values(server_args, FLAGS), engine))  # the one flag table
    method = getattr(server_args, "quantization", None)
    if isinstance(method, str) and method:  # online FP8 of an unquantized checkpoint, as explain applies it
        from ...deployment.serve import engine_quantized

        values = engine_quantized({k: v for k, v in values.items() if lookup_key(k) is not None}, method, "sglang")
    return {k: v for k, v in values.items() if lookup_key(k) is not None}


def _served_catalog_facts(server_args: Any, catalog: Sequence[CatalogModel]) -> Mapping[str, object]:
    """The catalog's extra facts for a model served from a folder under a catalog id
    (``--served-model-name ID``), as vLLM's plugin looks them up: ``explain --model ID`` reads
    them, so the plugin must too."""
    served = getattr(server_args, "served_model_name", None)
    names = served if isinstance(served, (list, tuple)) else (served,)
    by_id = {m.id.lower(): m for m in catalog}
    for name in names:
        hit = by_id.get(str(name).strip().lower()) if isinstance(name, str) else None
        if hit is not None:
            return hit.facts
    return {}
