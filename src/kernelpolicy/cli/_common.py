"""Options and helpers shared by subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..facts.record import parse_fact_text

if TYPE_CHECKING:
    from ..facts import Facts
    from ..policy import Policy

__all__ = ["add_fact_options", "facts_from_args", "load_policy_from_args", "split_assignment", "target_facts"]


def split_assignment(text: str, what: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair (one clear error otherwise)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"`{text}`: expected {what}=VALUE")
    return key.strip(), value


def add_fact_options(p: argparse.ArgumentParser) -> None:
    """The deployment options of the CLI contract (docs/design.md)."""
    p.add_argument(
        "--gpu",
        required=True,
        metavar="SPEC",
        help="sm121, 12.1, 121, a product name (GB10, H200, RTX 5090, ...) or `auto`",
    )
    p.add_argument(
        "--model",
        metavar="ID_OR_PATH",
        help="a folder with config.json, a config.json, or a Hugging Face id (local HF cache, the shipped"
        " catalog, then the Hub unless HF_HUB_OFFLINE)",
    )
    p.add_argument("--model-type", metavar="T", help="the text model_type, instead of --model")
    p.add_argument("--quant", metavar="SCHEME", help="quantization scheme, with --model-type")
    p.add_argument("--scale-fmt", metavar="FMT", help="checkpoint scale format (ue8m0 or fp32)")
    p.add_argument("--fact", action="append", default=[], metavar="KEY=VALUE", help="set a fact (repeatable)")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable of the deployment (repeatable)",
    )
    p.add_argument("--moe-backend", metavar="B", help="an explicit MoE backend (vLLM names accepted)")
    p.add_argument("--linear-backend", metavar="B", help="an explicit dense-linear backend")
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="RULE_ID",
        help="let an explicit choice override this crash rule (repeatable)",
    )
    p.add_argument(
        "--engine",
        metavar="vllm==X.Y.Z",
        help="the engine release (sets its facts; sglang==X.Y.Z: the SGLang release whose flags explain prints)",
    )
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="FILE",
        help="an operator policy file on top of rules/ and policy/ (repeatable)",
    )
    p.add_argument(
        "--no-env",
        action="store_true",
        help="ignore this shell's environment (the VLLM_* variables rules read, KERNELPOLICY_FACTS)",
    )


def load_policy_from_args(args: argparse.Namespace) -> Policy:
    from ..dsl.loader import load_policy

    return load_policy(list(getattr(args, "policy", []) or []))


def _parse_facts(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, value = split_assignment(item, "KEY")
        out[key] = parse_fact_text(key, value)
    return out


def facts_from_args(args: argparse.Namespace, policy: Policy, *, read_env: bool = True) -> Facts:  # noqa: PLR0912, PLR0915 (predates the lint; split in a follow-up)
    """Facts from the deployment options (see :func:`add_fact_options`).

    Unless ``--no-env`` (or *read_env* false), the process environment is read through the one
    fact pipeline (:mod:`kernelpolicy.facts.pipeline`), as the vLLM plugin reads it; its
    warnings go to stderr.
    """
    import os
    import sys

    from ..deployment.build import derived_facts
    from ..deployment.pipeline import build_facts, engine_facts
    from ..deployment.serve import (
        apply_quantization,
        check_allow,
        check_engine,
        env_warnings,
        hub_options,
        read_deployment,
    )
    from ..facts import Facts
    from ..facts.gpu import check_gpu_facts

    deployment = read_deployment(args)  # vLLM's flags, its --config file and a serve line
    vars(args).update(vars(deployment.args))
    given = {**deployment.facts, **_parse_facts(args.fact)}
    env = dict(split_assignment(e, "NAME") for e in args.env)
    # warnings are printed once the facts stand: bad input gets its one error line alone
    warnings = [*deployment.notes, *env_warnings(list(env), policy)]
    if args.engine:
        name, sep, version = args.engine.partition("==")
        if name.strip() == "sglang" and sep:
            from ..releases.sglang.versions import known_releases, release_for

            if release_for(version) is None:
                known = ", ".join(known_releases())
                raise UsageError(f"--engine `{args.engine}`: not an SGLang release kernelpolicy knows (known: {known})")
        elif name.strip() == "vllm" and sep:
            check_engine(version)
        try:
            for key, value in engine_facts(args.engine).items():
                given.setdefault(key, value)
        except UsageError:
            raise UsageError(f"--engine `{args.engine}` is not of the form `vllm==X.Y.Z` or `sglang==X.Y.Z`") from None
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
    )
    warnings += built.warnings
    facts = apply_quantization(built.facts, deployment.quantization)
    if args.gpu == "auto":
        facts = _auto_gpu(policy).merged(facts)
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
    check_gpu_facts(facts.values, facts.sources, policy.gpus)
    for warning in warnings:
        print(f"kernelpolicy: warning: {warning}", file=sys.stderr)
    return facts


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


def target_facts(python: Path, engine: str, venv_hint: str) -> dict[str, object]:
    """The package facts *engine*'s plugin reads in the venv of *python* (run there with this
    kernelpolicy on ``PYTHONPATH``, without importing the engine).

    :raises UsageError: when *python* does not run or has no *engine*.
    """
    import json
    import os
    import subprocess

    import kernelpolicy

    query = (
        f"import json; from kernelpolicy.engines.{engine}._facts import package_facts; "
        "print(json.dumps(package_facts()))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(Path(kernelpolicy.__file__).resolve().parent.parent)  # this kernelpolicy
    try:
        proc = subprocess.run(
            [str(python), "-c", query], capture_output=True, text=True, timeout=120, check=False, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot run `{python}`: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UsageError(f"`{python}` failed to report its packages: {last}")
    values: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    if f"{engine}.version" not in values:
        raise UsageError(f"{engine} is not installed for `{python}`", help=f"build a venv with `{venv_hint} X.Y.Z`")
    return values
