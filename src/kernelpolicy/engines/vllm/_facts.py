"""Facts about a running vLLM process, read from vLLM's own config, platform and packages.

Called lazily (at the first selection point), inside the vLLM process; imports vLLM then.
These are the *derived* layer of the one fact pipeline (:mod:`kernelpolicy.deployment.pipeline`):
the environment variables rules read, ``KERNELPOLICY_FACTS`` and the defaults are added there,
exactly as ``kernelpolicy explain`` adds them.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ...releases.table import config_values
from ...releases.vllm.flags import FLAGS, facts_of

if TYPE_CHECKING:
    from ...facts.model import CatalogModel

__all__ = ["config_key", "facts_from_vllm", "package_facts"]

#: the packages whose versions the plugin reads (keys of the facts providers' table)
_PACKAGES: Final = ("vllm", "torch", "triton", "flashinfer", "cutlass_dsl")


def package_facts() -> dict[str, object]:
    """Installed versions of vLLM and its kernel packages, and the DeepGEMM build vLLM loads.

    Reads package metadata and files only (nothing is imported), so ``kernelpolicy vllm
    audit`` runs it in another venv's interpreter too.
    """
    from ...facts.providers import installed

    return installed(_PACKAGES)


def _gpu_facts() -> dict[str, object]:
    from vllm.platforms import current_platform

    from ...facts.gpu import facts_from_capability

    cap = current_platform.get_device_capability()
    if cap is None:
        return {}
    try:
        name = str(current_platform.get_device_name())
    except Exception:
        name = None
    return facts_from_capability(int(cap[0]), int(cap[1]), name)


def _raw_config(model_config: Any) -> Mapping[str, Any]:
    """The checkpoint's own config.json, as ``explain --model`` reads it.

    vLLM's ``hf_config`` is transformers' config class, which may rename the model type (a
    DeepSeek-V3 checkpoint loads as another class's ``model_type``) and adds defaults; the file
    itself is read from the model folder or the local Hugging Face cache, and ``hf_config``
    only stands in when neither has it.
    """
    model, revision, _ = _model_ref(model_config)
    candidates = [Path(model) / "config.json"] if model else []
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json", revision=revision) if model else None
        if isinstance(cached, str):
            candidates.append(Path(cached))
    except Exception:  # not a repo id, or no huggingface_hub: the folder is all there is
        pass
    from ...facts.model import ModelConfigError, read_json

    for path in candidates:
        try:  # bounded: a FIFO or a device there is refused, not waited on
            data = read_json(path) if path.is_file() else None
        except ModelConfigError:
            data = None
        if isinstance(data, Mapping):
            return data
    hf = model_config.hf_config
    config: Mapping[str, Any] = hf.to_dict() if hasattr(hf, "to_dict") else dict(vars(hf))
    return config


def _catalog_facts(model_config: Any, catalog: Sequence[CatalogModel]) -> Mapping[str, Any]:
    """The catalog's extra facts for the served model (looked up by its id, as ``explain`` does)."""
    model, _, served = _model_ref(model_config)
    by_id = {m.id.lower(): m for m in catalog}
    for name in (model, *served):
        hit = by_id.get(name.strip().lower())
        if hit is not None:
            return hit.facts
    return {}


def facts_from_vllm(vllm_config: Any, catalog: Sequence[CatalogModel] = ()) -> dict[str, object]:
    """Fact values (keyed by fact key) for the process's platform and *vllm_config*.

    :param catalog: the shipped model catalog; a served model found in it gets the catalog's
        extra facts (e.g. the router weight's dtype), as with ``explain --model ID``.
    """
    from ...facts.model import facts_from_config

    values: dict[str, object] = {}
    values.update(_gpu_facts())
    machine = platform.machine()
    if machine in ("x86_64", "aarch64"):
        values["host.machine"] = machine
    values.update(package_facts())
    model_config = getattr(vllm_config, "model_config", None)
    if model_config is not None:
        values.update(facts_from_config(_raw_config(model_config)))
        values.update(_catalog_facts(model_config, catalog))
    values.update(_deploy_facts(vllm_config))
    return _quantized(_known(values), vllm_config)


def _model_ref(model_config: Any) -> tuple[str, str | None, tuple[str, ...]]:
    """The served model as vLLM's config names it: its folder or id, the revision, and the
    served names (what the config file and the catalog entry are looked up by)."""
    served = getattr(model_config, "served_model_name", None)
    names = tuple(served) if isinstance(served, (list, tuple)) else (served,)
    model = str(getattr(model_config, "model", "") or "")
    return model, getattr(model_config, "revision", None), tuple(n for n in names if isinstance(n, str))


def _deploy_facts(vllm_config: Any) -> dict[str, object]:
    """The facts of vLLM's flags, read from *vllm_config* through the one flag table
    (:mod:`.flags`: the entries ``kernelpolicy explain`` reads from a serve line), values outside
    a key's domain left unknown as there."""
    from ...deployment.serve import known_values

    values = facts_of(_flag_values(vllm_config))
    return known_values(values, [])


def _flag_values(vllm_config: Any) -> dict[str, Any]:
    """The flag values of *vllm_config* by ``dest``: the table's config paths, and the operator's
    ``--attention-backend`` as the plugin kept it before vLLM's model code ran (:mod:`._attention`;
    the running ``attention_config.backend`` may be vLLM's own choice)."""
    from ...releases.vllm.attention import id_of
    from ._attention import operator_backend

    values = config_values(vllm_config, FLAGS)
    attention = operator_backend(vllm_config)
    if attention is not None:  # vLLM's enum name as kernelpolicy's id where it has one (an MLA kernel: its family)
        values["attention_backend"] = id_of(attention) or attention
    return values


def _quantized(values: dict[str, object], vllm_config: Any) -> dict[str, object]:
    """*values* with vLLM's ``--quantization`` applied as ``explain`` applies it."""
    from ...deployment.serve import engine_quantized

    method = config_values(vllm_config, FLAGS).get("quantization")
    return values if method is None else engine_quantized(values, str(method), "vllm")


def config_key(vllm_config: Any) -> tuple[object, ...]:
    """What :func:`facts_from_vllm` reads from *vllm_config*, read by the same helpers, cheaply:
    two configs with equal keys give equal facts in one process (the GPU, the packages and the
    DeepGEMM build do not change while it runs; the config file is read from the same folder or
    cache entry)."""
    model_config = getattr(vllm_config, "model_config", None)
    return (
        _model_ref(model_config),
        # the fallback when no config.json is found: transformers' config object itself
        id(getattr(model_config, "hf_config", None)),
        tuple(sorted(_flag_values(vllm_config).items())),  # every flag the table reads
    )


def _known(values: Mapping[str, object]) -> dict[str, object]:
    """Only the keys the fact vocabulary has (a newer vLLM may offer more than we know)."""
    from ...facts.keys import lookup_key

    return {k: v for k, v in values.items() if lookup_key(k) is not None}
