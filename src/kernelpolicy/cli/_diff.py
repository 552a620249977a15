"""``kernelpolicy diff OLD NEW``: the blast radius of a rule change, cell group by cell group."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._numbers import flag_int
from ..errors import UsageError

__all__ = ["add_parser", "run"]

_SHOW = 10


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "diff",
        help="show every domain cell whose decision changes between two rule sets",
        description="Load OLD and NEW (rule or policy files or folders) each on top of the shipped "
        "rules/ and policy/ and the files $KERNELPOLICY_POLICY names (with --bare, alone), enumerate "
        "the joint domain, and list every group of cells whose backend changes on some path, grouped and counted. Exit "
        "status: 0 no change, 1 changes, 2 bad input.",
    )
    p.add_argument("old", metavar="OLD", help="the rule set before the change (a file or a folder)")
    p.add_argument("new", metavar="NEW", help="the rule set after the change (a file or a folder)")
    p.add_argument("--bare", action="store_true", help="compare OLD and NEW alone, without the shipped rules")
    p.add_argument("--json", action="store_true", help="print the changes as JSON")
    p.add_argument("--all", action="store_true", help=f"list every cell group (default: the first {_SHOW})")
    p.add_argument("--jobs", type=flag_int, default=None, metavar="N", help=argparse.SUPPRESS)  # (no longer used)
    p.set_defaults(run=run)


def _within(path: str, sides: tuple[str, ...]) -> bool:
    """Whether *path* is one of *sides* (files or folders) or lies in one of them."""
    mine = Path(path).resolve()
    return any(mine == Path(s).resolve() or Path(s).resolve() in mine.parents for s in sides)


def run(args: argparse.Namespace) -> int:
    from ..analysis.diffing import MAX_BOXES, diff
    from ..dsl.loader import load_policy
    from ._common import policy_files

    for item in (args.old, args.new):
        if not Path(item).exists():
            raise UsageError(f"no such file or folder `{item}`")
    shipped = not args.bare
    # as every command: $KERNELPOLICY_POLICY's files under both sides (--bare: OLD and NEW alone),
    # but for one that OLD or NEW is or holds: that is the file the change replaces
    base = [p for p in policy_files() if not _within(p, (args.old, args.new))] if shipped else []
    old = load_policy([*base, args.old], shipped=shipped, default_policy=shipped, environ=False)
    new = load_policy([*base, args.new], shipped=shipped, default_policy=shipped, environ=False)
    from ..progress import progress

    with progress("comparing every domain cell"):
        listed = MAX_BOXES if args.all or args.json else _SHOW
        report = diff(old, new, base=_ground(base, args.old, shipped), listed=listed)
    grouped = report.grouped()
    if args.json:
        out = {
            "schema": "kernelpolicy.diff/1",
            "old": args.old,
            "new": args.new,
            "cells": report.cells,
            "nodes": report.nodes,
            "seconds": round(report.seconds, 3),
            "changes": [
                {
                    "path": path,
                    "old": o,
                    "new": n,
                    "cells": report.totals[(path, o, n)][0],
                    "group_count": report.totals[(path, o, n)][1],
                    "groups": [{"cells": c.label, "count": c.cells} for c in items],
                }
                for (path, o, n), items in grouped.items()
            ],
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in report.lines(None if args.all else _SHOW)))
    return 1 if report.totals else 0


def _ground(base: list[str], old: str, shipped: bool) -> Any:
    """The proof of the files both sides stand on, where its certificate is at hand (``check``
    with no files writes the shipped tables'): both sides are then decided again only where
    their own files reach (:mod:`kernelpolicy.analysis.layered`)."""
    from ..analysis.certificate import pinned
    from ..analysis.checking import ground_proof
    from ..dsl.loader import discover, load_files, use_caches

    if not shipped or not use_caches():
        return None
    below = {f.display for f in discover(base, shipped=True, default_policy=True, environ=False)}
    files = pinned(discover([*base, old], shipped=True, default_policy=True, environ=False))
    return ground_proof(files, load_files(files), [f.display for f in files if f.display not in below])
