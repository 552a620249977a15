"""``kernelpolicy explain``: the decision for one deployment, and why."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import add_fact_options, facts_from_args, load_policy_from_args

__all__ = ["add_parser", "run"]

EXIT_NO_BACKEND = 3


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "explain",
        help="decide every path for a GPU and a model, and say why",
        description="Decide the backend of every path (dense, moe, router, warmup) and explain it.",
    )
    add_fact_options(p)
    p.add_argument("--json", action="store_true", help="print the decision as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..explain import render
    from ..resolver import resolve

    policy = load_policy_from_args(args)
    facts = facts_from_args(args, policy)
    decision = resolve(facts, policy)
    if args.json:
        sys.stdout.write(decision.to_json() + "\n")
    else:
        sys.stdout.write(render(decision, policy, model=args.model or args.model_type) + "\n")
    if not decision.ok:
        missing = [n for n, p in decision.paths.items() if n != "warmup" and p.applicable and p.backend is None]
        print(f"kernelpolicy: no valid backend for path(s): {', '.join(missing)}", file=sys.stderr)
        return EXIT_NO_BACKEND
    return 0
