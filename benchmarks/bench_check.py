"""``kernelpolicy check`` at scale: the shipped tables, then a generated scaling series.

    python benchmarks/bench_check.py [--jobs N] [--repeat R] [--layered-only] [FILE ...]

First the figures of the proof that composes (issue #22), in a fresh cache folder, with the
machine and the date: a one-rule operator file (the example policy's first rule) checked on top
of the shipped tables, cold (the shipped tables' certificate computed: a whole walk), warm
(the same file again: its own certificate is read) and edited (a new content, so a new proof of
it: only the cells the rule can change are walked, on the shipped tables' certificate, the
figure issue #22's "operator file, warm" target is about); the example policy the same way (the
shipped certificate kept); ``diff`` of two operator policies on top of the shipped tables (the example's
first rule against its first two); ``check --strict --all-findings policy/examples/fleet.yaml``
cold (a whole walk: warnings about the shipped rules need every cell) and warm (its certificate).

Prints, for the shipped rules and default policy (``discover(environ=False)``): the cells
verified per path, the groups of cells the exhaustive run resolved, the seconds, and cells
per second. Then the same tables with, in turn, every rule, every catalog model and every
catalog GPU doubled (the copies carry new ids or names and otherwise the same content,
written to a temporary folder), and all three doubled together: how the time grows against
the cells and the groups. Figures, not assertions (median of R runs, default 3).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kernelpolicy.analysis.checking import CheckReport, check
from kernelpolicy.analysis.diffing import diff
from kernelpolicy.dsl._source import SourceFile
from kernelpolicy.dsl.loader import discover, load_policy

EXAMPLE = Path(__file__).resolve().parent.parent / "policy" / "examples" / "fleet.yaml"

Doubler = Callable[[dict[str, Any]], None]


class _Dumper(yaml.SafeDumper):
    """Writes shared objects out in full: rule files allow no anchors or aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _double_rules(doc: dict[str, Any]) -> None:
    rules = doc.get("rules")
    if isinstance(rules, list):
        doc["rules"] = rules + [{**r, "id": f"{r['id']}-copy"} for r in rules if isinstance(r, dict) and "id" in r]


def _double_models(doc: dict[str, Any]) -> None:
    models = doc.get("models")
    if isinstance(models, list):
        doc["models"] = models + [{**m, "id": f"{m['id']}-copy"} for m in models if isinstance(m, dict)]


def _double_gpus(doc: dict[str, Any]) -> None:
    gpus = doc.get("gpus")
    if isinstance(gpus, list):
        copies = [{**g, "name": f"{g['name']} copy", "aliases": []} for g in gpus if isinstance(g, dict)]
        doc["gpus"] = gpus + copies


def generated(files: list[SourceFile], doublers: list[Doubler], into: Path) -> list[SourceFile]:
    """*files* rewritten under *into* with each doubler applied to every document."""
    out = []
    for i, f in enumerate(files):
        doc = yaml.safe_load(f.read_text())
        if isinstance(doc, dict):
            for d in doublers:
                d(doc)
        target = into / f"{i:03d}-{Path(f.display).name}"
        target.write_text(yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True))
        out.append(SourceFile(target, f.display, f.layer))
    return out


def run(files: list[SourceFile], jobs: int | None, repeat: int) -> tuple[CheckReport, float]:
    times, report = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        report = check(files, jobs=jobs, cache=False)
        times.append(time.perf_counter() - t)
    if report is None or report.coverage is None:
        raise SystemExit("the check did not run its coverage pass")
    return report, statistics.median(times)


def _timed_check(files: list[SourceFile], subject: list[str] | None, jobs: int | None) -> tuple[CheckReport, float]:
    t = time.perf_counter()
    report = check(files, jobs=jobs, subject=subject)
    return report, time.perf_counter() - t


def _operator(rules: list[Any], into: Path, name: str) -> Path:
    target = into / name
    target.write_text(yaml.dump({"rules": rules}, Dumper=_Dumper, sort_keys=False, allow_unicode=True))
    return target


def layered(jobs: int | None) -> None:
    """The composed proof's figures, each from a fresh cache folder (see the module docstring)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}: "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average {load[0]:.1f}",
        flush=True,
    )
    rules = yaml.safe_load(EXAMPLE.read_text())["rules"]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KERNELPOLICY_CACHE_DIR"] = str(Path(tmp) / "cache")
        one = _operator(rules[:1], Path(tmp), "one-rule.yaml")
        for name, path in (("one-rule.yaml", one), ("fleet.yaml", EXAMPLE)):
            files = discover([str(path)], environ=False)
            mine = [f.display for f in files if f.layer != "shipped"]
            for when in ("cold", "warm"):
                report, seconds = _timed_check(files, mine, jobs)
                print(f"check {name}, {when}: {seconds:7.2f} s  {_what(report)}", flush=True)
            if path == one:  # an edit: its own proof is new, the shipped tables' is kept
                path.write_text(path.read_text() + "# edited\n")
                report, seconds = _timed_check(discover([str(path)], environ=False), mine, jobs)
                print(f"check {name}, edited: {seconds:7.2f} s  {_what(report)}", flush=True)
        two = _operator(rules[:2], Path(tmp), "two-rules.yaml")
        t = time.perf_counter()
        d = diff(load_policy([one], environ=False), load_policy([two], environ=False), jobs=jobs)
        print(
            f"diff one-rule.yaml two-rules.yaml: {time.perf_counter() - t:7.2f} s  groups walked {d.groups:,}, "
            f"left out {d.skipped:,}, {sum(c.cells for c in d.changes):,} cells change",
            flush=True,
        )
        fleet = discover([str(EXAMPLE)], environ=False)
        for when in ("cold", "warm"):
            report, seconds = _timed_check(fleet, None, jobs)
            print(f"check --strict --all-findings fleet.yaml, {when}: {seconds:7.2f} s  {_what(report)}", flush=True)


def _what(report: CheckReport) -> str:
    s = report.summary or {}
    groups = sum(s.get("groups", {}).values())
    how = "certificate reused" if report.reused else ("composed" if s.get("certificate") else "whole walk")
    return f"groups walked {groups:,}, left out {s.get('skipped', 0):,}, {len(report.findings)} findings ({how})"


def line(name: str, report: CheckReport, seconds: float, base: float | None) -> str:
    cov = report.coverage
    assert cov is not None
    groups = sum(cov.groups.values())
    growth = f"  x{seconds / base:4.2f} time" if base else ""
    return (
        f"{name:<26} cells/path {cov.cells:>10,}  groups {groups:>7,}  resolves {cov.resolves:>7,}  "
        f"{seconds:6.2f} s  {cov.cells * len(cov.groups) / seconds:>12,.0f} cells/s{growth}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: check's own)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layered-only", action="store_true", help="only the composed proof's figures")
    ap.add_argument("files", nargs="*", type=Path, help="rule files instead of the shipped tables")
    args = ap.parse_args()
    if not args.files:
        layered(args.jobs)
        if args.layered_only:
            return
    files = [SourceFile(p, p.name, "shipped") for p in args.files] or discover(environ=False)
    report, base = run(files, args.jobs, args.repeat)
    print(line("given files" if args.files else "shipped tables", report, base, None), flush=True)
    series: list[tuple[str, list[Doubler]]] = [
        ("rules x2", [_double_rules]),
        ("models x2", [_double_models]),
        ("GPUs x2", [_double_gpus]),
        ("rules, models, GPUs x2", [_double_rules, _double_models, _double_gpus]),
    ]
    for name, doublers in series:
        with tempfile.TemporaryDirectory() as tmp:
            report, seconds = run(generated(files, doublers, Path(tmp)), args.jobs, args.repeat)
        print(line(name, report, seconds, base), flush=True)


if __name__ == "__main__":
    main()
