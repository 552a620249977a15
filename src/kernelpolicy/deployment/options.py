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
    from ..facts.env_report import EnvReport
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


def options_facts(  # noqa: PLR0912 (predates the lint; split in a follow-up)
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
    from ..releases import parse_engine
    from .build import on_machine
    from .pipeline import build_facts, engine_facts
    from .serve import apply_quantization, check_allow, env_warnings, read_deployment

    report = _reported_machine(args)
    deployment = read_deployment(args, policy)  # engine flags, a vLLM --config file and a launch line
    vars(args).update(vars(deployment.args))
    given = {**deployment.facts, **_parse_facts(args.fact)}
    env = {**(report.env if report is not None else {}), **dict(split_assignment(e, "NAME") for e in args.env)}
    # warnings are printed once the facts stand: bad input gets its one error line alone
    warnings = [*deployment.notes, *env_warnings(list(env), policy)]
    if args.engine:
        name = parse_engine(args.engine).name  # the form and a known (or older published) release, one line each
        if getattr(args, "serve", None) and name != deployment.engine:
            raise UsageError(
                f"--engine `{args.engine}` names another engine than the launch line's ({deployment.engine})"
            )
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
        derived=_derived(args, gpu, policy, report, given),
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


def _derived(
    args: argparse.Namespace, gpu: str | None, policy: Policy, report: EnvReport | None, given: Mapping[str, Any]
) -> Facts:
    """What the GPU spec and the model say, with the reported machine over them."""
    from .build import derived_facts
    from .serve import hub_options

    derived = derived_facts(gpu=gpu, model=args.model, policy=policy, hub=hub_options(args))
    if report is not None:
        derived = derived.merged(_report_facts(report, given, args.env_report))
    return derived


def _reported_machine(args: argparse.Namespace) -> EnvReport | None:
    """The ``--from-env-report`` report, with its GPU as ``--gpu`` when none is given.

    :raises UsageError: no GPU is given either way, or the report cannot be read.
    """
    report = _env_report(getattr(args, "env_report", None))
    if args.gpu is None and report is not None and report.gpu is not None:
        args.gpu = report.gpu
    if args.gpu is None:
        raise UsageError(
            "no GPU given: --gpu SPEC (sm121, GB10, H200, ...), `--gpu auto`, or --from-env-report FILE with a GPU line"
            " (see `kernelpolicy explain --help`)"
        )
    return report


def _env_report(name: str | None) -> EnvReport | None:
    """The report ``--from-env-report`` names, read with a bound.

    :raises UsageError: it cannot be read, or is no report kernelpolicy reads (naming the file).
    """
    if name is None:
        return None
    from .._files import ReadError, read_bounded
    from ..facts.env_report import ReportError, read_env_report

    try:
        text = read_bounded(name, _MAX_REPORT).decode("utf-8", "replace")
    except ReadError as exc:
        reason = "larger than 4 MB" if exc.too_large else exc.reason
        raise UsageError(f"--from-env-report `{name}`: cannot read it: {reason}") from None
    try:
        return read_env_report(text)
    except ReportError as exc:
        raise UsageError(f"--from-env-report `{name}`: {exc}") from None


#: The largest report read (a `vllm collect-env` of an eight-GPU node is about 20 kB).
_MAX_REPORT = 4_000_000


def _report_facts(report: EnvReport, given: Mapping[str, Any], name: str) -> Facts:
    """The reported machine's facts (source ``report``), each checked as ``--fact`` is, and the
    engine it ran (``deploy.engine``) unless the options name one."""
    from ..errors import FactError
    from ..facts import Facts
    from ..facts.record import normalise_value

    values: dict[str, Any] = {}
    for key, value in report.values.items():
        try:
            values[key] = normalise_value(key, value)
        except FactError as exc:
            raise UsageError(f"--from-env-report `{name}`: {exc}") from None
    if report.engine is not None and "deploy.engine" not in given:
        values["deploy.engine"] = report.engine
    return Facts.from_values(values, source="report")


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
