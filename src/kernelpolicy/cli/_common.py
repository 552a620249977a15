"""Options and helpers shared by subcommands."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..deployment.options import split_assignment
from ..errors import UsageError

if TYPE_CHECKING:
    from ..deployment.pipeline import BuiltFacts
    from ..facts import Facts
    from ..policy import Policy

__all__ = [
    "WARNINGS_SHOWN",
    "add_fact_options",
    "built_from_args",
    "facts_from_args",
    "load_policy_from_args",
    "output_file",
    "policy_files",
    "split_assignment",
    "target_facts",
    "update_output",
    "write_output",
]

#: The warning lines one command prints; the rest are counted on one more line (a flood of
#: 20,000 unread variables was 20,000 lines).
WARNINGS_SHOWN = 20


def add_fact_options(p: argparse.ArgumentParser) -> None:
    """The deployment options of the CLI contract (docs/design.md)."""
    p.add_argument(
        "--gpu",
        metavar="SPEC",
        help="sm121, 12.1, 121, a product name (GB10, H200, RTX 5090, ...) or `auto` (required unless"
        " --from-env-report names the GPU)",
    )
    p.add_argument(
        "--from-env-report",
        metavar="FILE",
        dest="env_report",
        help="the machine as a `vllm collect-env` or `python3 -m sglang.check_env` report describes it (its GPU,"
        " driver, packages and engine variables; what the options say wins)",
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


def policy_files(named: Sequence[str] = ()) -> list[str]:
    """The operator's policy files for a command: those ``$KERNELPOLICY_POLICY`` names, then
    *named* (``--policy``, ``check``'s FILES), loaded in that order on top of ``rules/`` and
    ``policy/``. Every command reads the variable through here, as the engine plugins do.

    :raises UsageError: for a path the variable names that does not exist.
    """
    from ..dsl.loader import POLICY_ENV, env_policy_paths

    from_env = env_policy_paths()
    for p in from_env:
        if not Path(p).exists():
            raise UsageError(
                f"no such file `{p}` (named by {POLICY_ENV})",
                help=f"fix or unset {POLICY_ENV}: a list of policy files separated by `{os.pathsep}`",
            )
    return [*from_env, *named]


def load_policy_from_args(args: argparse.Namespace) -> Policy:
    """``rules/``, ``policy/``, then :func:`policy_files` of ``--policy``."""
    from ..dsl.loader import load_policy

    return load_policy(policy_files(list(getattr(args, "policy", []) or [])), environ=False)


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
    from . import one_line

    built = options_facts(args, policy, read_env=read_env, venv=venv)
    for warning in built.warnings[:WARNINGS_SHOWN]:
        print(one_line(f"kernelpolicy: warning: {warning}"), file=sys.stderr)
    if len(built.warnings) > WARNINGS_SHOWN:
        print(
            f"kernelpolicy: warning: {len(built.warnings) - WARNINGS_SHOWN:,} more warnings not shown", file=sys.stderr
        )
    return built


def target_facts(python: Path, engine: str, venv_hint: str) -> dict[str, object]:
    """The package facts *engine*'s plugin reads in the venv of *python* (run there with this
    kernelpolicy on ``PYTHONPATH``, without importing the engine).

    :raises UsageError: when *python* does not run or has no *engine*.
    """
    import json
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


def output_file(option: str, name: str) -> Path:
    """The file *name* that *option* writes, checked before the command's work (a name, in a
    folder that is there, not a FIFO, device or folder).

    :raises UsageError: naming the option and the file.
    """
    from .._files import ReadError, output_path

    try:
        return output_path(name)
    except ReadError as exc:
        raise UsageError(f"{option} `{name}`: {exc.reason}") from None


def update_output(option: str, path: Path, update: Callable[[Path], None]) -> None:
    """Run *update* (which reads *path* with a bound and writes it at once), its errors as one line.

    :raises UsageError: naming the option, the file and why.
    """
    from .._files import ReadError

    try:
        update(path)
    except ReadError as exc:
        raise UsageError(f"{option} `{path}`: {exc.reason}") from None
    except OSError as exc:
        raise UsageError(f"{option} `{path}`: cannot write it: {(exc.strerror or str(exc)).lower()}") from None


def write_output(option: str, path: Path, text: str) -> None:
    """Write *text* to *path* at once (a temporary file renamed over it): whole or not at all,
    an old file kept when the write fails (a full disk, a file-size limit).

    :raises UsageError: naming the option, the file and why.
    """
    from .._files import ReadError, write_text_at_once

    try:
        write_text_at_once(path, text)
    except ReadError as exc:
        raise UsageError(f"{option} `{path}`: {exc.reason}") from None
    except OSError as exc:
        raise UsageError(f"{option} `{path}`: cannot write it: {(exc.strerror or str(exc)).lower()}") from None
