"""``kernelpolicy check`` as a function: load, analyse and verify a set of rule files.

The command line (:mod:`kernelpolicy.cli._check`) only formats what :func:`check` returns.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._collector import collector_paused
from ..dsl.files import SourceFile
from ..dsl.loader import NO_CACHE_ENV
from ..errors import PolicyError
from ..policy import Policy
from . import certificate
from .certificate import certificate_key
from .coverage import Coverage, PathGroup, Violation, verify
from .domain import build_domain
from .findings import Finding, from_diagnostic
from .implications import implication_conflicts
from .locate import Locator
from .releases import unknown_release_bounds
from .scope import Delta, delta
from .static import analyse

__all__ = ["CheckReport", "check", "summary", "violation_findings"]

#: How many cell groups a coverage finding names before it says how many more there are.
SHOW_GROUPS = 3


@dataclass
class CheckReport:
    """What a check found, and how much of the domain it verified."""

    files: tuple[SourceFile, ...]
    findings: list[Finding] = field(default_factory=list)
    coverage: Coverage | None = None  #: the walk (``None``: not run, or reused from a certificate)
    seconds: float = 0.0  #: the whole check: loading, analysis and the exhaustive run
    #: what the walk verified (:func:`summary`), whether it ran now or comes from a certificate
    summary: dict[str, Any] | None = None
    reused: bool = False  #: the findings and summary come from the certificate of these files

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    def failed(self, strict: bool = False) -> bool:
        """Errors fail a check; with *strict*, warnings do too."""
        return bool(self.errors or (strict and self.warnings))


def check(
    files: Sequence[SourceFile],
    *,
    coverage: bool = True,
    explicit: bool = False,
    jobs: int | None = None,
    subject: Sequence[str] | None = None,
    cache: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
    compose: bool = True,
) -> CheckReport:
    """Load *files* (every schema problem at once), analyse them and verify their domain.

    :param subject: the files under check (``display`` names), when the others (the shipped
        rules, say) are only the ground they stand on: warnings about rules outside them are
        not the operator's to fix and are left out; errors are kept, located in *subject*
        wherever one of its rules is involved. The ground's proof is then computed once (a
        certificate, :mod:`.certificate`) and the walk covers only the cells *subject*'s rules
        can change (:mod:`.scope`), when the ground is clean and *subject* adds only rules,
        implications and ``unsupported`` entries; otherwise every cell is walked.
    :param cache: reuse and keep certificates (default: unless ``KERNELPOLICY_NO_CACHE`` is set).
    :param progress: called with (parts walked, parts) as the exhaustive run goes.
    :param compose: with *subject*, walk only where it can change a decision when it may
        (``False``: every cell, for tests that compare the two).
    """
    from ..dsl.loader import load_files

    start = time.perf_counter()
    if cache is None:
        cache = os.environ.get(NO_CACHE_ENV, "") in ("", "0")
    report = CheckReport(tuple(files))
    try:
        policy = load_files(files)
    except PolicyError as exc:
        report.findings = [from_diagnostic(d) for d in exc.diagnostics]
        report.seconds = time.perf_counter() - start
        return report
    key = certificate_key(files, explicit=explicit, subject=subject) if coverage and cache and compose else None
    how = _How(coverage, explicit, jobs, subject, cache, progress, compose)
    if key is None:
        return _verified(report, policy, None, start, how)
    if _reused(report, key, start):
        return report
    with certificate.computing(key):  # a check of the same files elsewhere is waited for, then read
        if _reused(report, key, start):
            return report
        return _verified(report, policy, key, start, how)


@dataclass(frozen=True)
class _How:
    """The options of one :func:`check`, as it hands them on."""

    coverage: bool
    explicit: bool
    jobs: int | None
    subject: Sequence[str] | None
    cache: bool
    progress: Callable[[int, int], None] | None
    compose: bool


def _reused(report: CheckReport, key: str, start: float) -> bool:
    """Fill *report* from the certificate of *key*, where there is one."""
    cert = certificate.read(key)
    if cert is None:
        return False
    report.findings, report.summary, report.reused = cert.findings, cert.summary, True
    report.seconds = time.perf_counter() - start
    return True


@collector_paused()
def _verified(report: CheckReport, policy: Policy, key: str | None, start: float, how: _How) -> CheckReport:
    """Analyse and walk *policy* (the loaded files of *report*); keep the certificate of *key*."""
    files, explicit, subject = report.files, how.explicit, how.subject
    locator = Locator(files)
    report.findings = [from_diagnostic(d) for d in policy.warnings]
    ground: tuple[Delta, str | None] | None = None
    if how.coverage and subject is not None and how.compose:
        ground = _ground(files, subject, policy, explicit=explicit, jobs=how.jobs, cache=how.cache)
    cov = None
    if how.coverage:
        scope = ground[0] if ground is not None else None
        cov = verify(policy, explicit=explicit, jobs=how.jobs, scope=scope, progress=how.progress)
    report.findings += analyse(policy, cov, locator)
    report.findings += [locator.locate(f, f.field) if f.field else f for f in unknown_release_bounds(policy)]
    located: list[Finding] = []
    if ground is None or ground[0].implications:
        # (on a clean ground, FILES that add no implication hold its implications in its order,
        # over classes no coarser for them: the ground's proof found no conflict, nor can this)
        located += implication_conflicts(policy, cov.domain if cov is not None else build_domain(policy))
    if cov is not None:
        report.findings += violation_findings(policy, cov, locator)
        located += unused_unsupported(policy, cov)
        report.coverage = cov
        report.summary = summary(cov, ground[1] if ground is not None else None)
    report.findings += [locator.locate(f, f.field) if f.field else f for f in located]
    if subject is not None:
        mine = set(subject)
        report.findings = [f for f in report.findings if f.level == "error" or not f.file or f.file in mine]
    report.findings.sort(key=lambda f: (f.level != "error", f.file == "", f.file, f.line, f.column, f.code))
    if key is not None and cov is not None and report.summary is not None:
        certificate.write(certificate.Certificate(key, report.findings, report.summary, *_outcomes(cov)))
    report.seconds = time.perf_counter() - start
    return report


def _outcomes(cov: Coverage) -> tuple[list[list[Any]], list[str]]:
    """Each group walked as ``[path, backend, cells, [class ...], [rule ...]]``, its classes
    (``dimension=label``) and rule ids as indexes into one table of names (a walk of the shipped
    tables has ~140,000 groups: spelled out, more than 64 MB)."""
    names: dict[str, int] = {}

    def at(name: str) -> int:
        return names.setdefault(name, len(names))

    groups = [
        [
            pg.path,
            pg.backend,
            pg.group.weight,
            [at(f"{d}={v.label}") for d, v in pg.group.fixed.items()],
            [at(r) for r in sorted(pg.fires)],
        ]
        for pg in cov.results
    ]
    return groups, list(names)


def summary(cov: Coverage, ground: str | None = None) -> dict[str, Any]:
    """What a walk verified, as data: cells per path, dimensions, groups walked per path,
    resolves, seconds; with a *ground* certificate, the groups left to it (``skipped``) and
    its key."""
    return {
        "cells": cov.cells,
        "groups": dict(cov.groups),
        "resolves": cov.resolves,
        "seconds": round(cov.seconds, 3),
        "dimensions": [d.name for d in cov.domain.dims],
        "pruned": len(cov.domain.pruned),
        "skipped": cov.skipped,
        "certificate": ground,
    }


def _ground(
    files: Sequence[SourceFile],
    subject: Sequence[str],
    policy: Policy,
    *,
    explicit: bool,
    jobs: int | None,
    cache: bool,
) -> tuple[Delta, str | None] | None:
    """What *subject* changes on the files it stands on, when the check may walk only that:
    the ground's own proof (its certificate, computed here the first time) finds no error, and
    the two differ only in rules, implications and ``unsupported`` entries. With it, its key."""
    from ..dsl.loader import load_files

    mine = set(subject)
    base = [f for f in files if f.display not in mine]
    if not base or len(base) == len(files):
        return None
    proof = check(base, explicit=explicit, jobs=jobs, cache=cache)
    if proof.failed() or proof.summary is None:
        return None  # the ground breaks something itself: walk every cell of the whole
    try:
        found = delta(load_files(base), policy)
    except PolicyError:
        return None
    if found is None:
        return None
    key = certificate_key(base, explicit=explicit, subject=None) if cache else None
    return found, key


def violation_findings(policy: Policy, cov: Coverage, locator: Locator) -> list[Finding]:
    """The invariants the exhaustive run found broken, one finding per kind, path and rule,
    with the number of cells and the first few groups of cells."""
    grouped: dict[tuple[str, str, tuple[str, ...]], list[tuple[PathGroup, Violation]]] = {}
    walked: dict[str, str] = {}  # a contradiction raises on every path's walk: count one
    for pg in cov.results:
        for v in pg.violations:
            if v.code == "contradiction":
                if walked.setdefault(v.message, v.path) != v.path:
                    continue
                grouped.setdefault((v.code, v.message, ()), []).append((pg, v))
            else:
                grouped.setdefault((v.code, v.path, v.rules), []).append((pg, v))
    out: list[Finding] = []
    for (code, path, rules), items in grouped.items():  # path: the message, for contradictions
        cells = sum(v.group.weight for _, v in items)
        shown = "; ".join(v.group.label() for _, v in items[:SHOW_GROUPS])
        more = len(items) - SHOW_GROUPS
        where = shown + (f"; and {more} more groups" if more > 0 else "")
        pg, first = items[0]
        if code == "no-backend":
            out.append(_no_backend(policy, locator, path, pg, first, where, cells))
            continue
        if code == "contradiction":
            ids = [s for s in _sources(first.message) if s in policy.by_id]
            f = Finding(
                code,
                f"{first.message} in {_cells(cells)}",
                "error",
                rule=ids[-1] if ids else None,
                help="give one of the rules a narrower `when`, or put them in different layers",
                cell=where,
                cells=cells,
            )
            out.append(locator.locate(f, "use", "prefer") if ids else f)
            continue
        f = Finding(
            code,
            f"{first.message} in {_cells(cells)}",
            "error",
            rule=rules[0] if rules else None,
            cell=where,
            cells=cells,
        )
        out.append(locator.locate(f, "deny", "require", "requires") if rules else f)
    return out


def _no_backend(
    policy: Policy, locator: Locator, path: str, pg: PathGroup, first: Violation, where: str, cells: int
) -> Finding:
    """A hole, pointed at the rule that made it: an operator's rule where one rejects a backend
    there (operators never edit shipped rules), else the rule that rejects the last backend the
    catalog allows, else the path's catalog."""
    rejecting = [
        policy.by_id[r] for c in pg.candidates for r in c.rules if r in policy.by_id and policy.by_id[r].kind != "use"
    ]
    why = "; ".join(f"`{c.backend}` {c.reason or 'is rejected'}" for c in pg.candidates)
    helps = [f"in {first.group.label()}: {why}"]
    culprit = next((r for layer in ("policy", "user") for r in rejecting if r.layer == layer), None)
    culprit = culprit or (rejecting[-1] if rejecting else None)
    if culprit is not None:
        helps.append(
            f"rule `{culprit.id}` rejects a backend there: narrow its `when` so a backend is left, or, if no "
            "kernel runs there at all, declare the cells in an `unsupported` entry"
        )
    f = Finding(
        "no-backend",
        f"path `{path}` has no valid backend in {_cells(cells)}",
        "error",
        rule=culprit.id if culprit else None,
        help="; ".join(helps),
        cell=where,
        cells=cells,
    )
    if culprit is not None:
        return locator.locate(f, "when", culprit.kind)
    entry = next(iter(policy.backends.get(path, {}).values()), None)
    return locator.locate(f, "backend", owner=entry.rule_id) if entry else f


def unused_unsupported(policy: Policy, cov: Coverage) -> list[Finding]:
    """``unsupported`` entries that cover no cell without a backend: the backend exists there."""
    used = {u for pg in cov.results for u in pg.known}
    return [
        Finding(
            "unsupported-unused",
            f"`unsupported` entry `{u.id}` covers no cell where path "
            f"{' or '.join(f'`{p}`' for p in u.paths)} lacks a backend",
            "warning",
            u.origin.file,
            u.origin.line,
            1,
            u.id,
            help="a backend runs wherever it holds: remove it, or fix its `when`",
            field="when",
        )
        for u in policy.unsupported
        if u.id not in used
    ]


def _cells(n: int) -> str:
    return f"{n:,} cell" + ("" if n == 1 else "s")


def _sources(message: str) -> list[str]:
    """The backticked names in a contradiction message, in order."""
    parts = message.split("`")
    return [parts[i] for i in range(1, len(parts), 2)]
