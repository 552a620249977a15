"""``kernelpolicy check``: validate rule files, analyse them, and verify the whole domain."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError

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
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for the exhaustive run (default: one per CPU)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.checking import check
    from ..analysis.sarif import to_sarif
    from ..dsl.loader import SourceFile, discover
    from ._common import policy_files

    if args.bare and not args.files:
        raise UsageError("--bare needs FILES to check")
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
    from ..progress import progress

    own = [f.display for f in files if f.layer != "shipped"]
    subject = None if args.bare or args.all_findings or not named else own
    with progress("checking") as shown:
        report = check(
            files,
            coverage=not args.no_coverage,
            explicit=args.explicit,
            jobs=args.jobs,
            subject=subject,
            progress=shown.fraction,
        )
    summary: dict[str, Any] = report.summary or {}
    if args.sarif_file:
        sarif = json.dumps(to_sarif(report.findings, [f.display for f in files]), indent=2) + "\n"
        try:
            Path(args.sarif_file).write_text(sarif, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write `{args.sarif_file}`: {exc.strerror or exc}") from exc
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


def _verified(summary: dict[str, Any], reused: bool) -> str:
    """What the walk verified, and where its proof came from (one line each)."""
    per = ", ".join(f"{p} {n}" for p, n in summary["groups"].items()) or "no"
    lines = [
        f"verified {summary['cells']:,} domain cells over {len(summary['dimensions'])} dimensions "
        f"({per} groups, {summary['resolves']} resolves) in {summary['seconds']:.2f} s"
    ]
    if summary.get("certificate"):
        lines.append(
            f"walked only where FILES can change a decision: {summary['skipped']:,} groups of cells from the "
            f"certificate of the files they stand on ({summary['certificate'][:12]})"
        )
    if reused:
        lines.append("the proof of these exact files was reused from their certificate")
    return "\n".join(lines)
