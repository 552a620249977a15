"""``kernelpolicy explain``: the decision for one deployment, and why."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..deployment.serve import add_vllm_options
from ._common import add_fact_options, built_from_args, load_policy_from_args

if TYPE_CHECKING:
    from ..decision import Decision

__all__ = ["add_parser", "run"]

EXIT_NO_BACKEND = 3
#: An explicit choice (a backend flag, an engine variable, a policy `use`) was refused: the
#: decision names another backend on that path (docs/design.md, "Exit status").
EXIT_REFUSED = 5


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "explain",
        help="decide every path for a GPU and a model, and say why",
        description="Decide the backend of every path (dense, moe, router, warmup) and explain it.",
    )
    add_fact_options(p)
    add_vllm_options(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--explain",
        choices=("notes", "full"),
        default="notes",
        help="how much to print: `notes` (default: each path's backend and the rules that decided it,"
        " in 80 columns) or `full` (every candidate and why it lost, refs, rule places)",
    )
    out.add_argument("--json", action="store_true", help="print the decision as JSON")
    out.add_argument(
        "--summary",
        action="store_true",
        help="print the one line the engine's plugin (vLLM or SGLang) logs at start-up for this decision",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..decision import with_provenance
    from ..deployment.serve import launch_line
    from ..releases import parse_engine
    from ..render.explain import render, render_notes
    from ..render.flags import with_engine_flags
    from ..resolver import resolve

    line = launch_line(args)  # as the user typed it (the facts read merge the serve line into args)
    policy = load_policy_from_args(args)
    built = built_from_args(args, policy)
    decision = with_provenance(resolve(built.facts, policy), policy, args.model)
    if built.conflicts:  # a stated fact the engine's config contradicts: the decision records it
        decision = dataclasses.replace(decision, warnings=(*decision.warnings, *built.conflicts))
    unmodelled = _unmodelled(built.facts.values)
    if unmodelled:  # a release before the scanned ones: say what the answer rests on
        decision = dataclasses.replace(decision, warnings=(*decision.warnings, unmodelled))
    releases = dict([parse_engine(args.engine)]) if args.engine else {}  # that release's flags
    decision = with_engine_flags(decision, policy, releases)
    if args.summary:
        sys.stdout.write(_startup_line(decision) + "\n")
    elif args.json:
        sys.stdout.write(decision.to_json() + "\n")
    else:
        text = render if args.explain == "full" else render_notes
        sys.stdout.write(text(decision, policy, model=args.model or args.model_type, line=line) + "\n")
    if not decision.ok:
        missing = [n for n, p in decision.paths.items() if n != "warmup" and p.applicable and p.backend is None]
        print(f"kernelpolicy: no valid backend for path(s): {', '.join(missing)}", file=sys.stderr)
        return EXIT_NO_BACKEND
    if decision.refused:
        refused = ", ".join(f"`{o.source}` ({o.path}: {', '.join(o.rules) or '?'})" for o in decision.refused)
        print(f"kernelpolicy: explicit choice refused, another backend decided: {refused}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def _unmodelled(values: Mapping[str, Any]) -> str | None:
    """The warning for the deployment's engine release when it is older than the modelled ones
    (the release data is read only when a release is stated)."""
    from ..releases import DEFAULT, NAMES

    engine = str(values.get("deploy.engine") or DEFAULT)
    version = values.get(f"{engine}.version")
    if version is None or engine not in NAMES:
        return None
    from ..releases.range import unmodelled_warning

    return unmodelled_warning(engine, str(version))


def _startup_line(decision: Decision) -> str:
    """The line the deployment's engine plugin (vLLM's or SGLang's, ``deploy.engine``) logs
    once per process for this decision."""
    from ..render.summary import startup_summary  # the plugins' own rendering of the paths

    values = decision.facts.values
    engine = str(values.get("deploy.engine") or "vllm")
    version, sm = values.get(f"{engine}.version") or "?", values.get("gpu.sm") or "gpu=?"
    return f"kernelpolicy: {engine} {version} {sm} {startup_summary(decision)} fingerprint={decision.fingerprint}"
