"""Assemble a :class:`Facts` record from a GPU spec, a model and explicit overrides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import FactError, did_you_mean
from ._keys import BACKENDS
from ._record import Facts, normalise_value
from .gpu import facts_from_spec
from .model import facts_from_config, find_model

if TYPE_CHECKING:
    from ..policy import Policy

__all__ = ["backend_id", "facts_for", "model_facts"]


def model_facts(model: str, policy: Policy) -> Facts:
    """Facts about *model*: a catalog id, a folder with config.json, or a config.json path."""
    config, extra, source = find_model(model, policy.models)
    derived = Facts.from_values(facts_from_config(config), source=source)
    if extra:
        derived = derived.merged(Facts.from_values(extra, source="catalog"))
    return derived


def backend_id(path: str, name: str, policy: Policy) -> str:
    """A backend id for *path*, accepting engine names as aliases (vLLM `cutlass` for MoE)."""
    if name in BACKENDS[path]:
        return name
    for engine in policy.engines.values():
        alias = engine.aliases.get(path, {}).get(name)
        if alias is not None:
            return alias
    hint = did_you_mean(name, BACKENDS[path])
    key = "deploy.moe_backend" if path == "moe" else "deploy.linear_backend"
    raise FactError(
        key,
        f"`{name}` is not a {path} backend",
        help=f"did you mean `{hint[0]}`?" if hint else "ids: " + ", ".join(BACKENDS[path]),
    )


def facts_for(
    *,
    gpu: str | None = None,
    model: str | None = None,
    facts: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    moe_backend: str | None = None,
    linear_backend: str | None = None,
    policy: Policy | None = None,
) -> Facts:
    """Facts for a deployment, most authoritative last: GPU spec, model, then overrides.

    :param gpu: ``sm121``, ``12.1``, ``121``, or a product name from the GPU catalog.
    :param model: a catalog id, a folder with ``config.json``, or a ``config.json`` path.
    :param facts: explicit ``key: value`` facts (source ``user``); they win over derived ones.
    :param env: environment variables of the deployment (``deploy.env.<NAME>``).
    :param moe_backend: an explicit MoE backend (kernelpolicy id or engine alias).
    :raises UnknownGPUError, UnknownModelError, FactError: on bad input.
    """
    if policy is None:
        from ..dsl.loader import load_policy

        policy = load_policy()
    out = Facts.empty()
    if gpu is not None:
        out = out.merged(Facts.from_values(facts_from_spec(gpu, policy.gpus), source="spec"))
    if model is not None:
        out = out.merged(model_facts(model, policy))
    user: dict[str, Any] = {}
    for k, v in (facts or {}).items():
        user[k] = normalise_value(k, v)
    for name, value in (env or {}).items():
        user[f"deploy.env.{name}"] = str(value)
    if moe_backend is not None:
        user["deploy.moe_backend"] = moe_backend
    if linear_backend is not None:
        user["deploy.linear_backend"] = linear_backend
    for key, path in (("deploy.moe_backend", "moe"), ("deploy.linear_backend", "dense")):
        if key in user:
            user[key] = backend_id(path, str(user[key]), policy)
    if user:
        out = out.merged(Facts.from_values(user, source="user"))
    defaults = {k: v for k, v in (("deploy.tp", 1), ("deploy.ep", 1)) if k not in out}
    if defaults:
        out = Facts.from_values(defaults, source="default").merged(out)
    if "quant.scheme" in out and "quant.moe_scheme" not in out and out.get("model.is_moe"):
        out = out.merged(
            Facts(
                values={"quant.moe_scheme": out.get("quant.scheme")},
                sources={"quant.moe_scheme": out.sources["quant.scheme"]},
            )
        )
    return out
