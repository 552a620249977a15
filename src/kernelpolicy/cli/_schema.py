"""``kernelpolicy schema``: print (or write) the JSON Schemas of rule files and JSON outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    from ..tools.schemas import SCHEMA_NAMES

    p: argparse.ArgumentParser = sub.add_parser(
        "schema",
        help="print the JSON Schema of rule files or of a JSON output",
        description="Print a JSON Schema: `rules` (rule and policy files, for editors), `decision` "
        "(explain --json), `check` (check --json), `facts` (facts --json), `fleet` (fleet --json), "
        "`diff` (diff --json), `matrix` (matrix --format json), `vllm-audit` (vllm audit --json), "
        "`vllm-matrix` (vllm audit --matrix --json) or `sglang-audit` (sglang audit --json). With "
        "--write DIR, write every schema to DIR/NAME.schema.json (how schemas/ is made).",
    )
    p.add_argument("name", nargs="?", choices=SCHEMA_NAMES, metavar="NAME", help=", ".join(SCHEMA_NAMES))
    p.add_argument("--write", metavar="DIR", help="write every schema into DIR")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.schemas import SCHEMA_NAMES, render

    if args.write is not None:
        if args.name:
            raise UsageError("give NAME or --write DIR, not both")
        if not args.write.strip():  # Path("") is the current folder: never a guess
            raise UsageError("--write: an empty folder name")
        folder = Path(args.write)
        if not folder.is_dir():
            raise UsageError(f"--write `{args.write}`: no such folder")
        from .._files import ReadError, write_text_at_once

        for name in SCHEMA_NAMES:
            try:
                write_text_at_once(folder / f"{name}.schema.json", render(name))
            except ReadError as exc:
                raise UsageError(f"--write `{args.write}`: `{name}.schema.json`: {exc.reason}") from None
        return 0
    if not args.name:
        raise UsageError(f"say which schema: one of {', '.join(SCHEMA_NAMES)}")
    sys.stdout.write(render(args.name))
    return 0
