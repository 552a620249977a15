"""``kernelpolicy sglang audit`` and ``kernelpolicy sglang venv``: what a real SGLang selects per
path on a simulated GPU, beside kernelpolicy's decision (:mod:`._sglang_matrix`).

``audit --matrix`` sweeps every catalog model (or ``--model``) on every GPU family (or
``--gpu``): SGLang alone, with the plugin, and with the flags ``explain`` prints. Without
``--matrix`` the same runs are done for one ``--model`` on one ``--gpu`` and printed per path.

Exit status: 0 every cell follows the decision; 1 a cell differs or conflicts; 2 bad input, or
the audit could not run (no venv, the probe failed).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._paths import expand_user
from ..errors import UsageError
from ._common import load_policy_from_args, output_file, target_facts, update_output

if TYPE_CHECKING:
    from ..engines.sglang.conformance import CellResult

__all__ = ["add_parser", "run"]

EXIT_DIFFERS: Final = 1
EXIT_BAD_INPUT: Final = 2
_VENV_HINT: Final = "kernelpolicy sglang venv"


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "sglang",
        help="check an SGLang release against kernelpolicy's decision",
        description="Tools for kernelpolicy's SGLang adapter.",
    )
    ssub = p.add_subparsers(dest="sglang_command", metavar="COMMAND")
    ssub.required = True
    a: argparse.ArgumentParser = ssub.add_parser(
        "audit",
        help="SGLang's own choice per path beside kernelpolicy's, alone, with the plugin and with the flags",
        description=(
            "Run a real SGLang's resolution and per-layer dispatch on a simulated GPU, alone, with the "
            "kernelpolicy plugin and with the flags `explain --engine sglang==X.Y.Z` prints, and compare "
            "each path with kernelpolicy's decision. Exit 0: every cell follows the decision; 1: a cell "
            "differs or conflicts; 2: bad input or the audit could not run."
        ),
    )
    a.add_argument("--policy", action="append", default=[], metavar="PATH", help="operator policy file or folder")
    where = a.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="VENV_PYTHON", help="the python of a venv with SGLang installed")
    where.add_argument(
        "--sglang", metavar="X.Y.Z", help=f"an SGLang release whose cached venv ({_VENV_HINT} X.Y.Z) to use"
    )
    a.add_argument("--model", action="append", metavar="ID", help="a catalog model (repeat; default: every one)")
    a.add_argument(
        "--gpu", action="append", metavar="FAMILY", help="sm90, sm100, sm120 or sm121 (repeat; default: all)"
    )
    a.add_argument("--matrix", action="store_true", help="the sweep as a table (the default prints per cell)")
    a.add_argument(
        "--markdown", metavar="FILE", help="write this release's section of FILE (docs/sglang-conformance.md)"
    )
    a.add_argument("--json", action="store_true", help="print the cells as JSON")
    a.add_argument("--timeout", type=float, default=1800.0, metavar="S", help="limit for each SGLang probe (s)")
    a.set_defaults(run=run)
    from . import _venv

    _venv.add_parser(ssub, engine="sglang", label="SGLang")


def _target_python(args: argparse.Namespace) -> Path:
    from ..engines.sglang.testing import default_venv_python

    if args.python:
        python = expand_user(args.python)
        if not python.is_file():
            raise UsageError(f"--python `{args.python}`: no such file")
        return python
    if not args.sglang:
        raise UsageError("`sglang audit` needs --sglang X.Y.Z or --python VENV_PYTHON")
    from .._venvs import built_python

    python = default_venv_python(args.sglang)
    if built_python(args.sglang, "sglang") is None:  # refuses a venv another user could have planted
        raise UsageError(
            f"no cached venv of SGLang `{args.sglang}` at `{python}`",
            help=f"build it with `{_VENV_HINT} {args.sglang}`, or pass --python VENV_PYTHON",
        )
    return python


def _target_facts(python: Path) -> dict[str, object]:
    return target_facts(python, "sglang", _VENV_HINT)


def _print_cells(results: Sequence[CellResult]) -> None:
    """Per cell: the verdict, the decision, what each run ran, and the flags."""
    for x in results:
        print(f"{x.model} on {x.family}: {x.result}" + (f" ({x.reason})" if x.reason else ""))
        decided = x.to_dict()["kernelpolicy"]
        print("  decision: " + ", ".join(f"{p}={v}" for p, v in decided.items() if v is not None))
        for label, run in (("SGLang alone", x.native), ("with the plugin", x.patched), ("with the flags", x.flagged)):
            what = {
                "dense": run.dense_function or run.dense_method,
                "moe": run.moe_runner or run.moe_method,
                "router": run.router,
            }
            errors = f"; errors in: {', '.join(sorted(run.errors))}" if run.errors else ""
            print(f"  {label}: " + ", ".join(f"{p}={v}" for p, v in what.items() if v) + errors)
        env = [f"{k}={v}" for k, v in x.flags.get("env", {}).items()]
        print("  flags: " + (" ".join([*env, *x.flags.get("args", ())]) or "(none)"))


def run(args: argparse.Namespace) -> int:
    from ..engines.conformance import FAMILIES
    from ..engines.sglang.conformance import render_markdown, run_matrix, update_document
    from ..engines.sglang.testing import SimulationError
    from ..facts.model import find_model
    from ..releases.sglang.flags import moe_ids_of

    python = _target_python(args)
    policy = load_policy_from_args(args)
    families = list(args.gpu or FAMILIES)
    for family in families:
        if family not in FAMILIES:
            raise UsageError(f"--gpu `{family}`: one of " + ", ".join(f"`{f}`" for f in FAMILIES))
    models = list(args.model or [m.id for m in policy.models])
    for model in models:
        find_model(model, policy.models)  # an unknown model: one line, before SGLang starts
    markdown = output_file("--markdown", args.markdown) if args.markdown is not None else None  # before the sweep
    target = _target_facts(python)
    try:
        results = run_matrix(python, policy, models, families, target, timeout=args.timeout)
    except SimulationError as exc:
        print(f"kernelpolicy: error: the SGLang sweep failed: {str(exc).strip()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    version = str(target["sglang.version"])
    section = render_markdown(version, results, moe_ids_of(policy.engines["sglang"]))
    if markdown is not None:
        update_output("--markdown", markdown, lambda path: update_document(path, version, section))
    if args.json:
        data = {"schema": "kernelpolicy.sglang-audit/1", "sglang": version, "cells": [r.to_dict() for r in results]}
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    elif args.matrix and not args.markdown:
        sys.stdout.write(section)
    elif not args.matrix:
        _print_cells(results)
    return 0 if all(r.result == "same" for r in results) else EXIT_DIFFERS
