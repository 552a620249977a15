"""``kernelpolicy fmt``: put rule and policy files in the canonical layout (comments kept)."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Any

from ..errors import PolicyError, UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "fmt",
        help="format rule and policy files (key order, flow style for short conditions, comments kept)",
        description="Rewrite FILES (or the YAML files under folders) in the canonical layout; with --check, "
        "change nothing and exit 1 when a file is not formatted. Exit status: 0 formatted, 1 (--check) "
        "some file would change, 2 bad input.",
    )
    p.add_argument("files", nargs="+", metavar="FILES", help="rule or policy files or folders")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file would change")
    p.add_argument("--diff", action="store_true", help="with --check, print what would change")
    p.add_argument("--schema", metavar="URI", help="the `$schema` the header line names (default: found)")
    p.set_defaults(run=run)


def _targets(items: list[str]) -> list[Path]:
    from ..dsl.files import SourceError, yaml_files_under

    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            try:
                out += yaml_files_under(p)
            except SourceError as exc:
                raise PolicyError([exc.diagnostic]) from None
        elif p.exists():
            out.append(p)
        else:
            raise UsageError(f"no such file or folder `{item}`")
    return out


def run(args: argparse.Namespace) -> int:
    from ..dsl.files import SourceError, decode, read_bounded
    from ..tools.fmt import format_text

    changed = 0
    for path in _targets(args.files):
        try:  # the loader's bounded reader: regular files only, at most 1 MB, UTF-8
            text = decode(read_bounded(path, str(path)), str(path))
        except SourceError as exc:
            raise PolicyError([exc.diagnostic]) from None
        new = format_text(text, file=path, schema=args.schema)
        if new == text:
            continue
        changed += 1
        if args.check:
            sys.stdout.write(f"would reformat {path}\n")
            if args.diff:
                sys.stdout.writelines(
                    difflib.unified_diff(text.splitlines(True), new.splitlines(True), f"{path}", f"{path} (formatted)")
                )
        else:
            path.write_text(new, encoding="utf-8")
            sys.stdout.write(f"reformatted {path}\n")
    return 1 if args.check and changed else 0
