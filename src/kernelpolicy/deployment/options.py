"""The deployment the CLI's options describe, assembled: a GPU spec or this machine, a model,
engine flags and a launch line, the environment, ``--fact``/``--env`` overrides (``explain``,
``vllm audit``). The command line parses the options; the facts are assembled here.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..facts.record import parse_fact_text
from .pipeline import BuiltFacts

if TYPE_CHECKING:
    from ..facts import Facts
    from ..policy import Policy

__all__ = ["options_facts", "split_assignment"]


def split_assignment(text: str, what: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair (one clear error otherwise)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"`{text}`: expected {what}=VALUE")
    return key.strip(), value


def _parse_facts(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, value = split_assignment(item, "KEY")
        out[key] = parse_fact_text(key, value)
    return out


def options_facts(  # noqa: PLR0912, PLR0915 (predates the lint; split in a follow-up)
    args: argparse.Namespace,
    policy: Policy,
    *,
    read_env: bool = True,
    venv: Mapping[str, object] | None = None,
) -> BuiltFacts:
    """The facts of the deployment the CLI's options describe (``explain``'s, ``vllm audit``'s), in
    the documented order (:mod:`kernelpolicy.deployment`), and the warnings found on the way.

    Unless ``--no-env`` (or *read_env* false), the process environment is read through the one
    fact pipeline, as the engine plugins read it. *venv*: the package facts of a target venv
    (``vllm audit``), over everything but an explicit ``--fact``.
    """
    import os

    from ..facts import Facts
    from ..facts.gpu import check_gpu_facts
    from .build import derived_facts, on_machine
    from .pipeline import build_facts, engine_facts
    from .serve import (
        apply_quantization,
        check_allow,
        check_engine,
        env_warnings,
        hub_options,
        read_deployment,
    )

    deployment = read_deployment(args, policy)  # engine flags, a vLLM --config file and a launch line
    vars(args).update(vars(deployment.args))
    given = {**deployment.facts, **_parse_facts(args.fact)}
    env = dict(split_assignment(e, "NAME") for e in args.env)
    # warnings are printed once the facts stand: bad input gets its one error line alone
    warnings = [*deployment.notes, *env_warnings(list(env), policy)]
    if args.engine:
        from .pipeline import parse_engine

        try:
            name, version = parse_engine(args.engine)
        except UsageError:
            raise UsageError(f"--engine `{args.engine}` is not of the form `vllm==X.Y.Z` or `sglang==X.Y.Z`") from None
        if getattr(args, "serve", None) and name != deployment.engine:
            raise UsageError(
                f"--engine `{args.engine}` names another engine than the launch line's ({deployment.engine})"
            )
        from ..releases.range import older_than_modelled

        if older_than_modelled(name, version, published=True):
            pass  # a published release before the modelled ones: answered, with a warning (explain)
        elif name == "sglang":
            from ..releases.sglang.versions import known_releases, release_for

            if release_for(version) is None:
                known = ", ".join(known_releases())
                raise UsageError(f"--engine `{args.engine}`: not an SGLang release kernelpolicy knows (known: {known})")
        else:
            check_engine(version)
        for key, value in engine_facts(args.engine).items():
            given.setdefault(key, value)
    if args.allow:
        check_allow(args.allow, policy)
        given["deploy.allow_rules"] = tuple(args.allow)
    if args.model and (args.model_type or args.quant):
        raise UsageError("give either --model or --model-type/--quant, not both")
    gpu = None if args.gpu == "auto" else args.gpu
    environ = None if getattr(args, "no_env", False) or not read_env else os.environ
    built = build_facts(
        policy,
        derived=derived_facts(gpu=gpu, model=args.model, policy=policy, hub=hub_options(args)),
        environ=environ,
        facts=given,
        env=env,
        moe_backend=args.moe_backend,
        linear_backend=args.linear_backend,
        running=deployment.facts,  # the engine's flags, as the plugin reads them from its config
        runs="the launch line" if getattr(args, "serve", None) else "the engine's flags",
    )
    warnings += built.warnings
    facts = apply_quantization(built.facts, deployment.quantization, deployment.engine)
    if args.gpu == "auto":
        facts = on_machine(_auto_gpu(policy), facts, policy)
    if args.model_type or args.quant:
        synthetic: dict[str, Any] = {}
        if args.model_type:
            synthetic["model.type"] = args.model_type
        if args.quant:
            synthetic["quant.scheme"] = parse_fact_text("quant.scheme", args.quant)
            if "quant.moe_scheme" not in given:
                synthetic["quant.moe_scheme"] = synthetic["quant.scheme"]
        facts = Facts.from_values(synthetic, source="user").merged(facts)
    if args.scale_fmt:
        facts = facts.merged(Facts.from_values({"quant.scale_fmt": args.scale_fmt}, source="user"))
    if "quant.scheme" not in facts and args.model is None and not args.model_type:
        raise UsageError("no model given: use --model ID_OR_PATH, or --model-type T --quant SCHEME")
    if venv:
        from ..facts import Facts

        facts = facts.merged(Facts.from_values({k: v for k, v in venv.items() if k not in given}, source="venv"))
    check_gpu_facts(facts.values, facts.sources, policy.gpus)
    return BuiltFacts(facts, tuple(warnings), built.conflicts)


def _auto_gpu(policy: Policy) -> Facts:
    """The facts this machine reports (NVML, package metadata), for ``--gpu auto``."""
    from ..facts import Facts
    from ..facts.machine import auto_gpu_facts

    try:
        values, sources = auto_gpu_facts()
    except ValueError as exc:
        raise UsageError(str(exc), help="name the GPU instead: --gpu sm121, --gpu GB10, ...") from None
    f = Facts.from_values(values, source="nvml")
    return Facts(values=f.values, sources={k: sources.get(k, "nvml") for k in f.values})
