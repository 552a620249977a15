"""Options and helpers shared by subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..deployment.options import split_assignment
from ..errors import UsageError

if TYPE_CHECKING:
    from ..deployment.pipeline import BuiltFacts
    from ..facts import Facts
    from ..policy import Policy

__all__ = [
    "add_fact_options",
    "built_from_args",
    "facts_from_args",
    "load_policy_from_args",
    "split_assignment",
    "target_facts",
]


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


def facts_from_args(
    args: argparse.Namespace, policy: Policy, *, read_env: bool = True, venv: Mapping[str, object] | None = None
) -> Facts:
    """Facts from the deployment options (see :func:`add_fact_options`), assembled by
    :func:`kernelpolicy.deployment.options.options_facts`; its warnings go to stderr.

    Unless ``--no-env`` (or *read_env* false), the process environment is read through the one
    fact pipeline, as the engine plugins read it.
    """
    return built_from_args(args, policy, read_env=read_env, venv=venv).facts


def built_from_args(
    args: argparse.Namespace, policy: Policy, *, read_env: bool = True, venv: Mapping[str, object] | None = None
) -> BuiltFacts:
    """:func:`facts_from_args`, with the warnings (printed) and the conflicts a decision records."""
    import sys

    from ..deployment.options import options_facts

    built = options_facts(args, policy, read_env=read_env, venv=venv)
    for warning in built.warnings:
        print(f"kernelpolicy: warning: {warning}", file=sys.stderr)
    return built


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
