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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._paths import expand_user
from ..errors import UsageError
from ..facts.keys import PATHS
from ._common import (
    add_fact_options,
    facts_from_args,
    load_policy_from_args,
    output_file,
    split_assignment,
    target_facts,
    update_output,
)

if TYPE_CHECKING:
    from ..decision import Decision
    from ..engines.vllm.conformance import Difference
    from ..engines.vllm.testing import NativeChoices

__all__ = ["add_parser", "run"]

EXIT_DIVERGENT: Final = 1
EXIT_BAD_INPUT: Final = 2
SCHEMA: Final = "kernelpolicy.vllm-audit/1"
#: the paths the audit compares (issue #39: the harness does not probe attention yet)
_PATHS: Final = tuple(p for p in PATHS if p != "attention")
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
        from ..deployment.pipeline import parse_engine

        name, engine_version = parse_engine(args.engine) if "==" in args.engine else ("", "")
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


def _whole(text: str) -> str:
    """vLLM's whole error: the message, then the traceback's last frames, indented."""
    lines = [x.rstrip() for x in text.strip().splitlines() if x.strip()]
    return "\n".join(lines[:1] + ["    " + x.strip() for x in lines[1:]])


def _probe_failure(native: NativeChoices, decision: Decision) -> str | None:
    """Why the probe's answer cannot be audited (a selection step that the model has failed)."""
    if "probe" in native.errors:
        return native.errors["probe"]
    for path in ("dense", "moe"):
        p = decision.paths.get(path)
        applies = p is not None and p.applicable
        if path in native.errors and applies:
            return native.errors[path]
    return None


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
        print(f"kernelpolicy: error: the vLLM probe failed: {_whole(str(exc)) or type(exc).__name__}", file=sys.stderr)
        return EXIT_BAD_INPUT
    failure = _probe_failure(native, decision)
    if failure is not None:
        print(f"kernelpolicy: error: vLLM's selection failed in the probe: {_whole(failure)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    divergences = native.divergences()
    differences = audit_differences(native, decision)
    conflicts = [d for d in differences if d.kind == "conflict"]
    code = EXIT_DIVERGENT if divergences or conflicts else 0
    report = _report(args, python, native, decision, divergences, differences, code)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(_render(report) + "\n")
    return code


def _native_label(native: NativeChoices, path: str) -> str:
    choice = native.backends().get(path)
    if path == "dense" and native.dense is not None:
        raw = native.dense.kernel
        return f"{choice or raw or 'none'}" + (f" ({raw})" if raw and choice else "")
    if path == "moe" and native.moe is not None:
        if native.moe.backend is None:
            return f"n/a ({native.moe.reason})" if native.moe.reason else "none"
        return f"{choice or native.moe.backend} ({native.moe.backend})"
    if path == "router" and native.router is not None:
        if native.router.backend is None:
            return f"n/a ({native.router.reason})" if native.router.reason else "none"
        return str(native.router.backend)
    if path == "warmup":
        return choice or "nothing"
    return choice or "none"


def _kp_label(decision: Decision, path: str) -> str:
    if path == "warmup":
        return ", ".join(decision.warmup) or "nothing"
    p = decision.paths[path]
    if not p.applicable:
        return f"n/a ({p.reason})"
    head = p.backend or "NO VALID BACKEND"
    if p.explicit:
        return f"{head} (explicit: {p.explicit})"
    if p.rule:
        return f"{head} ({p.rule})"
    return head


def _report(
    args: argparse.Namespace,
    python: Path,
    native: NativeChoices,
    decision: Decision,
    divergences: Sequence[str],
    differences: Sequence[Difference],
    code: int,
) -> dict[str, Any]:
    from ..engines.vllm.conformance import kp_choice, native_choice

    by_path = {d.path: d for d in differences}
    paths: dict[str, Any] = {}
    for path in _PATHS:
        diff = by_path.get(path)
        paths[path] = {
            "vllm": native_choice(native, path),
            "vllm_label": _native_label(native, path),
            "kernelpolicy": kp_choice(decision, path),
            "kernelpolicy_label": _kp_label(decision, path),
            "same": diff is None,
            "kind": diff.kind if diff else None,
            "reason": diff.reason if diff else None,
        }
    plugin = native.plugin or {}
    return {
        "schema": SCHEMA,
        "exit": code,
        "consistent": code == 0,
        "vllm": {"version": native.vllm_version, "python": str(python), "platform": native.platform},
        "gpu": {"cc": f"{native.gpu_cc[0]}.{native.gpu_cc[1]}", "sm": decision.facts.get("gpu.sm")},
        "model": {"spec": args.model, "type": native.model_type},
        "plugin": {
            "enabled": bool(args.plugin),
            "registered": plugin.get("registered"),
            "warnings": list(plugin.get("warnings") or ()),
            "fallbacks": [dict(f) for f in plugin.get("fallbacks") or ()],
        },
        "env": dict(native.env),
        "moe_backend": native.moe_backend,
        "paths": paths,
        "divergences": list(divergences),
        "differences": [d.to_dict() for d in differences],
        "probe_errors": dict(native.errors),
        "auto_disable_warning": native.auto_disable_warning,
        "fingerprint": decision.fingerprint,
        "engine": {k: dict(v) for k, v in decision.engine.items()},
        "elapsed_s": round(native.elapsed_s, 1),
    }


def _render(report: Mapping[str, Any]) -> str:
    v, gpu, model = report["vllm"], report["gpu"], report["model"]
    plugin = "plugin on" if report["plugin"]["enabled"] else "plugin off"
    setup = [f"{k}={val}" for k, val in report["env"].items()]
    if report["moe_backend"]:
        setup.append(f"--moe-backend {report['moe_backend']}")
    out = [
        f"vllm    {v['version']} ({v['python']}), {plugin}" + (", " + " ".join(setup) if setup else ""),
        f"gpu     {gpu['sm']} (simulated, cc {gpu['cc']})",
        f"model   {model['spec']}: {model['type']}",
        "",
    ]
    rows = [("path", "vLLM", "kernelpolicy", "")]
    for path, row in report["paths"].items():
        mark = "same" if row["same"] else ("CONFLICT" if row["kind"] == "conflict" else "differs")
        rows.append((path, row["vllm_label"], row["kernelpolicy_label"], mark))
    w0 = max(len(r[0]) for r in rows)
    w1 = min(max(len(r[1]) for r in rows), 48)
    w2 = min(max(len(r[2]) for r in rows), 48)
    out += [f"{a:<{w0}}  {b:<{w1}}  {c:<{w2}}  {d}".rstrip() for a, b, c, d in rows]
    for d in report["differences"]:
        out.append(f"  {d['path']}: {d['reason']}")
    out.append("")
    if report["divergences"]:
        out.append("divergences (vLLM's paths disagree with each other):")
        out += [f"  ! {d}" for d in report["divergences"]]
    else:
        out.append("divergences: none")
    for w in report["plugin"]["warnings"]:
        out.append(f"plugin warning: {w}")
    for f in report["plugin"]["fallbacks"]:
        out.append(f"plugin fallback: {f['path']} runs `{f['used']}`, not the decided `{f['decided']}`: {f['reason']}")
    for step, err in report["probe_errors"].items():
        out.append(f"probe: step `{step}` failed: {_whole(str(err))}")
    vllm_engine = report["engine"].get("vllm")
    if report["exit"] != 0 and vllm_engine is not None:
        merged = {**report["env"], **dict(vllm_engine.get("env", {}))}
        env = " ".join(f"{k}={val}" for k, val in merged.items())
        cmd = " ".join(x for x in (env, "vllm serve", str(model["spec"]), " ".join(vllm_engine.get("args", ()))) if x)
        out.append("")
        from .._install import install_command

        out.append(f"to follow kernelpolicy: {install_command('vllm')} (the plugin), or where flags can:")
        out.append(f"  {cmd}")
    n_div, n_conf = len(report["divergences"]), sum(1 for d in report["differences"] if d["kind"] == "conflict")
    verdict = "consistent" if report["exit"] == 0 else f"{n_div} divergence(s), {n_conf} conflict(s)"
    out.append("")
    out.append(f"result  {verdict} (exit {report['exit']}); fingerprint {report['fingerprint']}")
    return "\n".join(out)
