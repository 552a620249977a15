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
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.cases import find_cases, run_cases
    from ..errors import UsageError

    files = find_cases(args.cases)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UsageError(f"no case file `{missing[0]}`")
    if not files:
        raise UsageError("no case files found")
    results = run_cases(files)
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
    sys.stdout.flush()
    return 1 if failed else 0
