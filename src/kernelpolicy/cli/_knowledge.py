"""``kernelpolicy knowledge stale``: rules whose cited fix has shipped in a scanned release they do not bound."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "knowledge",
        help="reports on the rules' knowledge against the scanned engine releases",
        description="Reports on the rules against the releases scanned from the engines' and kernel "
        "packages' wheels (the release data installed with kernelpolicy, `kernelpolicy.releases`; "
        "`python -m kernelpolicy.tools.refresh` scans them again).",
    )
    reports = p.add_subparsers(dest="report", metavar="REPORT")
    reports.required = True
    stale = reports.add_parser(
        "stale",
        help="rules whose cited fix (`fixed in <package> <version>`) is in a scanned release they do not bound",
        description="List every rule whose `because` or `help` cites its fix (`fixed in FlashInfer 0.6.16`, "
        "`fixed in SGLang 0.5.17`) in a release that a scanned engine release is or pins, and that still "
        "acts on those releases: no `when` bound, `until` or met requirement retires it there. A rule that "
        "names how its fix shows in released code (`fix`: a file and a signature) is checked against every "
        "scanned release of the package: a release it treats as fixed whose code lacks the fix, or one whose "
        "code has it where the rule still acts, is listed too. The last line says the horizon: the newest "
        "release of each engine and package the data was scanned from; a release after it is not read. "
        "Exit status: 0 none, 1 some, 2 bad input.",
    )
    stale.add_argument("--policy", action="append", default=[], metavar="FILE", help="an operator policy file")
    stale.add_argument("--json", action="store_true", help="print JSON (`kernelpolicy.stale/1`)")
    stale.set_defaults(run=run)


def _span(versions: list[str]) -> str:
    from packaging.version import Version

    ordered = sorted(versions, key=Version)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"


def horizon() -> dict[str, dict[str, str]]:
    """The oldest and newest scanned release of each engine (``engines``) and of each package whose
    released code the fix signatures were read in (``code``): what `knowledge stale` can see."""
    from ..releases.packages import CONTENTS_FILE
    from ..releases.sglang.versions import release_records as sglang_records
    from ..releases.vllm.versions import release_records as vllm_records

    engines = {name: _span(list(records)) for name, records in (("vllm", vllm_records()), ("sglang", sglang_records()))}
    code: dict[str, str] = {}
    if CONTENTS_FILE.is_file():
        packages = json.loads(CONTENTS_FILE.read_text(encoding="utf-8")).get("packages", {})
        code = {name: _span(list(versions)) for name, versions in sorted(packages.items()) if versions}
    return {"engines": {k: v for k, v in engines.items() if v}, "code": code}


def _horizon_line(h: dict[str, dict[str, str]]) -> str:
    from ..releases import spec

    engines = ", ".join(f"{spec(name).title} {span}" for name, span in h["engines"].items())
    code = ", ".join(f"`{name}` {span}" for name, span in h["code"].items()) or "none"
    return (
        f"horizon: engine releases {engines}; released code read of {code}; "
        "a later release is not read (`python -m kernelpolicy.tools.refresh` scans the index again)\n"
    )


def run(args: argparse.Namespace) -> int:
    from ..analysis.fixes import cited_fixes, contradicted_windows, stale_bounds
    from ..dsl.loader import load_policy
    from ._common import policy_files

    policy = load_policy(policy_files(args.policy), environ=False)
    found = stale_bounds(policy)
    against = contradicted_windows(policy)
    checked = sum(1 for r in policy.rules if r.fix is not None)
    cited = sum(len(cited_fixes(r.because, r.help)) for r in policy.rules)
    cited += sum(len(cited_fixes(u.because, u.help)) for u in policy.unsupported)
    if args.json:
        doc = {
            "schema": "kernelpolicy.stale/1",
            "cited_fixes": cited,
            "stale": [
                {
                    "rule": s.rule,
                    "file": s.origin.file,
                    "line": s.origin.line,
                    "package": s.fix.package,
                    "fixed_in": s.fix.version,
                    "shipped_in": list(s.shipped_in),
                    "message": s.message(),
                }
                for s in found
            ],
            "checked_against_releases": checked,
            "contradicted": [
                {
                    "rule": c.rule,
                    "file": c.origin.file,
                    "line": c.origin.line,
                    "package": c.package,
                    "fixed_in": None if c.fix is None else c.fix.version,
                    "lacking": list(c.lacking),
                    "acting": list(c.acting),
                    "early": list(c.early),
                    "unscanned": c.unscanned,
                    "message": c.message(),
                }
                for c in against
            ],
        }
        doc["horizon"] = horizon()
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        for s in found:
            sys.stdout.write(f"{s.origin.file}:{s.origin.line}: {s.message()}\n")
        for c in against:
            sys.stdout.write(f"{c.origin.file}:{c.origin.line}: {c.message()}\n")
        sys.stdout.write(
            f"{len(found)} stale of {cited} cited fixes "
            f"({len(policy.rules) + len(policy.unsupported)} rules and unsupported entries read); "
            f"{len(against)} of {checked} windows contradicted by the released code\n"
        )
        sys.stdout.write(_horizon_line(horizon()))
    return 1 if found or against else 0
