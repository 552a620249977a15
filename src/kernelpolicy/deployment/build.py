"""Assemble a :class:`Facts` record from a GPU spec, a model and explicit overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..facts.gpu import facts_from_spec
from ..facts.model import locate_model
from ..facts.record import Facts
from .pipeline import _backend_id, build_facts

if TYPE_CHECKING:
    from ..facts.hub import HubOptions
    from ..policy import Policy

__all__ = ["backend_id", "derived_facts", "facts_for", "model_facts", "on_machine", "sweep_facts"]


def model_facts(model: str, policy: Policy, hub: HubOptions | None = None) -> Facts:
    """Facts about *model*: a folder, a config.json, or a Hub id (cache, catalog, Hub)."""
    found = locate_model(model, policy.models, hub)
    derived = Facts.from_values(found.model_facts(), source=found.source)
    if found.facts:
        derived = derived.merged(Facts.from_values(found.facts, source="catalog"))
    return derived


def backend_id(path: str, name: str, policy: Policy) -> str:
    """A backend id for *path*, accepting engine names as aliases (vLLM `cutlass` for MoE)."""
    return _backend_id(path, name, policy)


def derived_facts(*, gpu: str | None, model: str | None, policy: Policy, hub: HubOptions | None = None) -> Facts:
    """What a GPU spec and a model (catalog id, folder or config.json) say, before any override."""
    out = Facts.empty()
    if gpu is not None:
        out = out.merged(Facts.from_values(facts_from_spec(gpu, policy.gpus), source="spec"))
    if model is not None:
        out = out.merged(model_facts(model, policy, hub))
    return out


def facts_for(  # noqa: PLR0913 (predates the lint; split in a follow-up)
    *,
    gpu: str | None = None,
    model: str | None = None,
    facts: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    moe_backend: str | None = None,
    linear_backend: str | None = None,
    policy: Policy | None = None,
    environ: Mapping[str, str] | None = None,
    hub: HubOptions | None = None,
) -> Facts:
    """Facts for a deployment, most authoritative last: GPU spec, model, *environ*, overrides.

    :param gpu: ``sm121``, ``12.1``, ``121``, or a product name from the GPU catalog.
    :param model: a catalog id, a folder with ``config.json``, or a ``config.json`` path.
    :param facts: explicit ``key: value`` facts (source ``user``); they win over derived ones.
    :param env: environment variables of the deployment (``deploy.env.<NAME>``).
    :param moe_backend: an explicit MoE backend (kernelpolicy id or engine alias).
    :param hub: where Hub ids are looked up (default: the environment's Hugging Face settings).
    :param environ: a process environment to read ``deploy.env.*`` and ``KERNELPOLICY_FACTS``
        from (e.g. ``os.environ``); ``None`` reads none (see :mod:`kernelpolicy.deployment.pipeline`).
    :raises UnknownGPUError, UnknownModelError, FactError: on bad input.
    :raises TypeError: naming the parameter, for an argument of the wrong type.
    """
    from .._args import check_arg, check_mapping
    from ..facts.hub import HubOptions as _HubOptions
    from ..policy import Policy as _Policy

    for name, value in (("gpu", gpu), ("moe_backend", moe_backend), ("linear_backend", linear_backend)):
        check_arg("facts_for", name, value, str, type(None))
    check_arg("facts_for", "model", model, str, os.PathLike, type(None))
    check_mapping("facts_for", "facts", facts)
    check_mapping("facts_for", "env", env, values=(str,))
    check_mapping("facts_for", "environ", environ)
    check_arg("facts_for", "policy", policy, _Policy, type(None))
    check_arg("facts_for", "hub", hub, _HubOptions, type(None))
    if policy is None:
        from ..dsl.loader import load_policy

        policy = load_policy()
    return build_facts(
        policy,
        derived=derived_facts(gpu=gpu, model=model, policy=policy, hub=hub),
        environ=environ,
        facts=facts,
        env=env,
        moe_backend=moe_backend,
        linear_backend=linear_backend,
    ).facts


def on_machine(machine: Facts, deployment: Facts, policy: Policy) -> Facts:
    """*deployment*'s facts over what a machine reported (``--gpu auto``'s NVML and packages, a
    fleet node's facts file): the deployment's own facts win, then the GPU facts of both must agree.

    :raises FactError: GPU facts that contradict each other.
    """
    from ..facts.gpu import check_gpu_facts

    merged = machine.merged(deployment)
    check_gpu_facts(merged.values, merged.sources, policy.gpus)
    return merged


def sweep_facts(
    policy: Policy,
    model: str,
    gpu: str,
    target: Mapping[str, object],
    host: Mapping[str, object],
    *,
    env: Mapping[str, str] | None = None,
    moe_backend: str | None = None,
    flags: Mapping[str, object] | None = None,
) -> Facts:
    """A conformance sweep's deployment, as ``explain`` builds it: the GPU spec and the catalog
    model, the target venv's packages (source ``metadata``), the simulated GPU's name, host and
    engine (*host*, source ``spec``), then the env and flags through the one pipeline (*flags*: the facts of the serve
    line's flags, as ``explain -- vllm serve ...`` passes them)."""
    derived = derived_facts(gpu=gpu, model=model, policy=policy)
    derived = derived.merged(Facts.from_values(target, source="metadata")).merged(
        Facts.from_values(host, source="spec")
    )
    return build_facts(policy, derived=derived, facts=flags, env=env, moe_backend=moe_backend).facts
