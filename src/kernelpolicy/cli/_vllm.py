"""``kernelpolicy vllm audit``: what a real vLLM selects per path, beside kernelpolicy's decision.

vLLM's own selectors run in a target venv on a simulated GPU (:mod:`kernelpolicy.engines.vllm.testing`);
kernelpolicy resolves the same deployment (GPU, model config, env, ``--moe-backend``, and the
target venv's package versions). The audit flags two things:

- *divergences*: paths of that one vLLM process that disagree with each other (the dense path
  refuses DeepGEMM for the model while the MoE path runs it, a warmup that JIT-compiles a kernel
  no path runs);
- *differences*: a path where vLLM's choice is not kernelpolicy's; a *conflict* when vLLM runs a
  backend the decision rejects (or warms a kernel it does not), a *preference* otherwise.

Exit status: 0 consistent; 1 divergences or conflicts found; 2 bad input, or the audit could
not run (no venv, the probe failed).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from .._paths import expand_user
from ..errors import UsageError
from ._common import (
    add_fact_options,
    facts_from_args,
    load_policy_from_args,
    output_file,
    split_assignment,
    target_facts,
    update_output,
)

__all__ = ["add_parser", "run"]

EXIT_DIVERGENT: Final = 1
EXIT_BAD_INPUT: Final = 2
_VENV_HINT: Final = "kernelpolicy vllm venv"


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "vllm",
        help="check a vLLM release against kernelpolicy's decision",
        description="Tools for kernelpolicy's vLLM adapter.",
    )
    vsub = p.add_subparsers(dest="vllm_command", metavar="COMMAND")
    vsub.required = True
    a: argparse.ArgumentParser = vsub.add_parser(
        "audit",
        help="vLLM's own choice per path beside kernelpolicy's, with divergences flagged",
        description=(
            "Run a real vLLM's kernel selection on a simulated GPU and compare it, path by path, "
            "with kernelpolicy's decision for the same deployment. Exit 0: consistent; "
            "1: divergences or conflicts; 2: bad input or the audit could not run."
        ),
    )
    add_fact_options(a)
    where = a.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="VENV_PYTHON", help="the python of a venv with vLLM installed")
    where.add_argument(
        "--vllm",
        metavar="X.Y.Z",
        help=f"a vLLM release whose cached venv ({_VENV_HINT} X.Y.Z) to use",
    )
    a.add_argument("--plugin", action="store_true", help="load kernelpolicy's vLLM plugin in that vLLM")
    a.add_argument("--timeout", type=float, default=400.0, metavar="S", help="limit for the vLLM probe (s)")
    a.add_argument("--json", action="store_true", help="print the audit as JSON")
    a.add_argument(
        "--matrix",
        action="store_true",
        help="the conformance sweep: every catalog model (or --model) on every GPU family (or --gpu), "
        "without and with the plugin, in one vLLM process",
    )
    a.add_argument(
        "--markdown",
        metavar="FILE",
        help="with --matrix: write this release's section of FILE (docs/vllm-conformance.md)",
    )
    for action in a._actions:  # --gpu: required for one audit, optional for the sweep
        if action.dest == "gpu":
            action.required = False
    a.set_defaults(run=run)
    from . import _venv

    _venv.add_parser(vsub)


# ----------------------------------------------------------------------------- the target venv


def _target_python(args: argparse.Namespace) -> tuple[Path, str | None]:
    from ..engines.vllm.testing import default_venv_python

    version = args.vllm
    if args.engine:
        from ..releases import parse_engine

        name, engine_version = parse_engine(args.engine, known=False) if "==" in args.engine else ("", "")
        if name != "vllm":
            raise UsageError(f"--engine `{args.engine}` is not of the form `vllm==X.Y.Z`")
        if version and version != engine_version:
            raise UsageError(f"--engine `{args.engine}` and --vllm `{version}` name different releases")
        version = version or engine_version
        if args.python:
            raise UsageError("give --python or --engine, not both (the venv says which vLLM it has)")
    if args.python:
        python = expand_user(args.python)
        if not python.is_file():
            raise UsageError(f"--python `{args.python}`: no such file")
        return python, None
    if not version:
        raise UsageError("say which vLLM to audit: --vllm X.Y.Z (a cached venv) or --python VENV_PYTHON")
    from .._venvs import built_python

    python = default_venv_python(version)
    if built_python(version, "vllm") is None:  # refuses a venv another user could have planted
        raise UsageError(
            f"no vLLM `{version}` venv at `{python}`",
            help=f"build it with `{_VENV_HINT} {version}`, or pass --python VENV_PYTHON",
        )
    return python, version


def _target_facts(python: Path) -> dict[str, object]:
    return target_facts(python, "vllm", _VENV_HINT)


# ----------------------------------------------------------------------------- the audit


def _model_config(args: argparse.Namespace, policy: Any) -> Mapping[str, Any]:
    from ..facts.model import find_model

    if not args.model:
        raise UsageError("`vllm audit` needs --model ID_OR_PATH: vLLM reads the model's config.json")
    config, _extra, _source = find_model(args.model, policy.models)
    return config


def _gpu_of(facts: Any) -> tuple[tuple[int, int], str | None]:
    cc = str(facts.get("gpu.cc") or "")
    major, _, minor = cc.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise UsageError(f"--gpu: cannot simulate a GPU without a compute capability (got `{cc or '?'}`)")
    name = facts.get("gpu.name")
    return (int(major), int(minor)), str(name) if name else None


def _router_dtype(facts: Any) -> str | None:
    dtype = facts.get("model.router_dtype")
    return str(dtype) if dtype in ("bfloat16", "float16", "float32") else None


def _run_matrix(args: argparse.Namespace, python: Path, policy: Any) -> int:
    from ..engines.vllm.conformance import FAMILIES, matrix_cells, render_markdown, run_matrix, update_document
    from ..engines.vllm.testing import SimulationError

    families = None
    if args.gpu:
        if args.gpu not in FAMILIES:
            raise UsageError(f"--gpu `{args.gpu}` with --matrix: one of " + ", ".join(f"`{f}`" for f in FAMILIES))
        families = [args.gpu]
    if args.env or args.fact or args.moe_backend or args.plugin:
        raise UsageError(
            "--matrix sweeps its own options, with and without the plugin: drop --env/--fact/--moe-backend/--plugin"
        )
    markdown = output_file("--markdown", args.markdown) if args.markdown is not None else None  # before the sweep
    target = _target_facts(python)
    cells = matrix_cells(policy, [args.model] if args.model else None, families)
    try:
        results = run_matrix(python, policy, cells, target, timeout=max(args.timeout, 1800.0))
    except SimulationError as exc:
        print(f"kernelpolicy: error: the vLLM sweep failed: {str(exc).strip()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    version = str(target.get("vllm.version"))
    section = render_markdown(version, results)
    if markdown is not None:
        update_output("--markdown", markdown, lambda path: update_document(path, version, section))
    if args.json:
        data = {"schema": "kernelpolicy.vllm-matrix/1", "vllm": version, "cells": [r.to_dict() for r in results]}
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    elif not args.markdown:
        sys.stdout.write(section)
    return 0 if all(r.result == "same" for r in results) else EXIT_DIVERGENT


def run(args: argparse.Namespace) -> int:
    from ..engines.vllm.audit import audit_report, probe_failure, render_report, whole_error
    from ..engines.vllm.conformance import audit_differences
    from ..engines.vllm.testing import SimulationError, simulate
    from ..render.flags import with_engine_flags
    from ..resolver import resolve

    if args.linear_backend:
        raise UsageError("`vllm audit` does not simulate --linear-backend yet")
    python, _version = _target_python(args)
    policy = load_policy_from_args(args)
    if args.matrix:
        return _run_matrix(args, python, policy)
    if args.markdown:
        raise UsageError("--markdown goes with --matrix")
    if not args.gpu:
        raise UsageError("`vllm audit` needs --gpu SPEC (or --matrix for every GPU family)")
    if args.model_type or args.quant:
        raise UsageError("`vllm audit` needs --model ID_OR_PATH, not --model-type/--quant: vLLM reads config.json")
    config = _model_config(args, policy)
    target = _target_facts(python)
    # the deployment is what the flags say: the shell's VLLM_* variables do not reach the probe;
    # the target venv's packages count, unless the user set them (--fact wins)
    facts = facts_from_args(args, policy, read_env=False, venv=target)
    given = {split_assignment(f, "KEY")[0] for f in args.fact}
    decision = with_engine_flags(resolve(facts, policy), policy)
    cc, name = _gpu_of(facts)
    env = dict(split_assignment(e, "NAME") for e in args.env)
    from ..progress import progress

    try:
        with progress(f"running vLLM's selectors in {python}"):
            native = simulate(
                python,
                cc,
                config,
                env=env,
                moe_backend=args.moe_backend,
                plugin=args.plugin,
                facts={k: v for k, v in facts.values.items() if k in given} or None,
                router_dtype=_router_dtype(facts),
                gpu_name=name,
                timeout=args.timeout,
            )
    except SimulationError as exc:
        print(
            f"kernelpolicy: error: the vLLM probe failed: {whole_error(str(exc)) or type(exc).__name__}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    failure = probe_failure(native, decision)
    if failure is not None:
        print(f"kernelpolicy: error: vLLM's selection failed in the probe: {whole_error(failure)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    divergences = native.divergences()
    differences = audit_differences(native, decision)
    conflicts = [d for d in differences if d.kind == "conflict"]
    code = EXIT_DIVERGENT if divergences or conflicts else 0
    report = audit_report(args.model, bool(args.plugin), python, native, decision, divergences, differences, code)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(render_report(report) + "\n")
    return code
