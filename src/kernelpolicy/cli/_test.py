"""``kernelpolicy test``: run golden policy cases (facts in, expected decision out)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "test",
        help="run golden policy cases",
        description="Run golden policy cases (YAML: `given` facts, `expect`ed decision). "
        "Operators test their own policy files this way.",
    )
    p.add_argument("cases", nargs="+", metavar="CASE", help="case files or folders of them")
    p.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="FILE",
        help="an operator policy file loaded under every case (beside each case's own `policy`); repeatable",
    )
    p.add_argument(
        "--coverage",
        action="store_true",
        help="after the cases, the rules of the loaded files no case's decision read (as `opa test --coverage`)",
    )
    p.set_defaults(run=run)


#: the unexercised rules `--coverage` names one by one
_SHOWN = 40


def run(args: argparse.Namespace) -> int:
    from ..analysis.cases import find_cases, run_cases
    from ..errors import UsageError

    files = find_cases(args.cases)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UsageError(f"no case file `{missing[0]}`")
    if not files:
        raise UsageError("no case files found")
    from ._common import policy_files

    extra = [str(p) for p in policy_files(args.policy)]
    results = run_cases(files, extra)
    for r in results:
        if r.ok:
            if not args.quiet:
                print(f"PASS  {r.name}  ({r.file})")
            continue
        print(f"FAIL  {r.name}  ({r.file})")
        for line in ([r.error] if r.error else []) + list(r.failures):
            print(f"      {line}")
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    if args.coverage:
        _print_coverage(results, extra)
    sys.stdout.flush()
    return 1 if failed else 0


def _print_coverage(results: Any, extra: list[str]) -> None:
    """Which rules of the shipped tables and *extra* files the cases' decisions read."""
    from ..analysis.cases import coverage
    from ..dsl.loader import load_policy

    policy = load_policy(extra, environ=False)
    read, unread = coverage(results, policy.by_id)
    total = len(read) + len(unread)
    print(f"coverage: {len(read)} of {total} rules read by some case's decision ({100 * len(read) // max(total, 1)} %)")
    if unread:
        more = len(unread) - _SHOWN
        print("not read by any case: " + ", ".join(unread[:_SHOWN]) + (f" and {more} more" if more > 0 else ""))
