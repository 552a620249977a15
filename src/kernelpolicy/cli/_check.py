"""``kernelpolicy check``: validate rule files, analyse them, and verify the whole domain."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import one_line
from ._common import output_file, write_output

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="check rule and policy files, analyse them and verify every cell of the domain",
        description="Report schema errors (all of them, with file:line:column), impossible, dead, "
        "shadowed, contradictory and stale rules, and every domain cell where a path has no valid "
        "backend or a decision breaks an invariant. FILES load on top of the shipped rules/ and "
        "policy/ and the files $KERNELPOLICY_POLICY names (with --bare, FILES alone). "
        "Exit status: 0 clean, 1 errors (or warnings with --strict), 2 bad usage.",
    )
    p.add_argument("files", nargs="*", metavar="FILES", help="rule or policy files or folders")
    p.add_argument("--bare", action="store_true", help="check FILES alone, without the shipped rules")
    p.add_argument("--strict", action="store_true", help="fail on warnings too")
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--format",
        choices=("text", "json", "sarif", "github"),
        default="text",
        help="text (default), json, sarif (SARIF 2.1.0) or github (Actions annotations)",
    )
    out.add_argument("--json", dest="format", action="store_const", const="json", help="--format json")
    out.add_argument("--sarif", dest="format", action="store_const", const="sarif", help="--format sarif")
    p.add_argument(
        "--sarif-file",
        default=None,
        metavar="PATH",
        help="also write the findings as SARIF 2.1.0 to PATH (one run for annotations and code scanning)",
    )
    p.add_argument("--no-coverage", action="store_true", help="skip the exhaustive run")
    p.add_argument(
        "--all-findings",
        action="store_true",
        help="with FILES, also report warnings about the shipped rules they stand on",
    )
    p.add_argument(
        "--explicit", action="store_true", help="also enumerate explicit --moe-backend/--linear-backend choices"
    )
    p.add_argument("--jobs", type=_positive, default=None, metavar="N", help=argparse.SUPPRESS)  # (no longer used)
    p.set_defaults(run=run)


def _positive(text: str) -> int:
    """``--jobs`` (kept for old command lines, no longer used): a positive number in ASCII digits."""
    from .._numbers import ascii_int

    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:40]}` is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"`{value}`: expected at least 1 worker")
    return value


def run(args: argparse.Namespace) -> int:
    from ..analysis.sarif import to_sarif
    from ..dsl.loader import SourceFile, discover
    from ._common import policy_files

    if args.bare and not args.files:
        raise UsageError("--bare needs FILES to check")
    # checked before the proof
    sarif_file = output_file("--sarif-file", args.sarif_file) if args.sarif_file is not None else None
    # as every command: $KERNELPOLICY_POLICY's files, then FILES (--bare: FILES alone)
    named = list(args.files) if args.bare else policy_files(args.files)
    files = discover(named, shipped=not args.bare, default_policy=not args.bare, environ=False)
    missing = [f.display for f in files if not f.path.exists()]
    if missing:
        raise UsageError(f"no such file `{missing[0]}`")
    # a shipped file named again (a pre-commit hook in this repository) is checked once, as shipped
    unique: dict[Path, SourceFile] = {}
    for source in files:
        unique.setdefault(source.path.resolve(), source)
    files = list(unique.values())
    report = _checked(files, named, args)
    summary: dict[str, Any] = report.summary or {}
    for note in report.notes:  # on stderr in every format: stdout stays the format's
        print(one_line(f"kernelpolicy: warning: {note}"), file=sys.stderr)
    if sarif_file is not None:  # whole or not at all (the old file kept); a FIFO is refused, not waited on
        write_output(
            "--sarif-file",
            sarif_file,
            json.dumps(to_sarif(report.findings, [f.display for f in files]), indent=2) + "\n",
        )
    if args.format == "sarif":
        sys.stdout.write(json.dumps(to_sarif(report.findings, [f.display for f in files]), indent=2) + "\n")
    elif args.format == "github":
        from .._github import workflow_commands

        for line in workflow_commands(report.findings):
            sys.stdout.write(line + "\n")
        sys.stdout.write(f"{len(files)} files: {len(report.errors)} errors, {len(report.warnings)} warnings\n")
    elif args.format == "json":
        out = {
            "schema": "kernelpolicy.check/1",
            "files": [f.display for f in files],
            "errors": len(report.errors),
            "warnings": len(report.warnings),
            "findings": [f.to_dict() for f in report.findings],
            "coverage": summary,
            "certificate": "reused" if report.reused else "computed",
            "seconds": round(report.seconds, 3),
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        for f in report.findings:
            sys.stdout.write(f.render() + "\n")
        if summary:
            sys.stdout.write(_verified(summary, report.reused) + "\n")
        sys.stdout.write(
            f"{len(files)} files: {len(report.errors)} errors, {len(report.warnings)} warnings "
            f"in {report.seconds:.2f} s\n"
        )
    return 1 if report.failed(args.strict) else 0


def _checked(files: list[Any], named: list[str], args: argparse.Namespace) -> Any:
    """The check of *files*; a proof past its node budget is one line naming the files under check."""
    from ..analysis.checking import check
    from ..analysis.mdd import DiagramTooLarge
    from ..dsl.loader import use_caches

    own = [f.display for f in files if f.layer != "shipped"]
    subject = None if args.bare or args.all_findings or not named else own
    try:
        return check(
            files,
            coverage=not args.no_coverage,
            explicit=args.explicit,
            subject=subject,
            cache=use_caches(),  # KERNELPOLICY_NO_CACHE read as every on/off variable is
        )
    except DiagramTooLarge as exc:
        which = ", ".join(f"`{f}`" for f in (own or [f.display for f in files])[:3])
        raise UsageError(f"{which}: {exc}") from exc


def _verified(summary: dict[str, Any], reused: bool) -> str:
    """What the proof verified, and where it came from (one line each)."""
    from ..analysis.checking import cells_said

    per = ", ".join(f"{p} {n:,}" for p, n in summary["nodes"].items()) or "no"
    lines = [
        f"verified every one of {cells_said(summary['cells'])} over {len(summary['dimensions'])} dimensions "
        f"({per} diagram nodes; {summary['resolves']} outcomes resolved again by the resolver)"
    ]
    if reused:
        lines.append("the proof of these exact files was reused from their certificate")
    else:
        lines[0] += f" in {summary['seconds']:.2f} s"
    return "\n".join(lines)
