"""``kernelpolicy check`` as a function: load, analyse and verify a set of rule files.

The command line (:mod:`kernelpolicy.cli._check`) only formats what :func:`check` returns.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..dsl.files import SourceFile
from ..dsl.loader import use_caches
from ..errors import PolicyError
from ..policy import Policy
from . import certificate, layered
from .certificate import certificate_key, pinned
from .coverage import PATHS, Coverage, Violation, verify
from .domain import build_domain
from .findings import Finding, from_diagnostic
from .implications import implication_conflicts
from .layered import Base
from .locate import Locator
from .mdd import DEFAULT_BUDGET
from .releases import unknown_release_bounds
from .static import analyse

__all__ = ["CheckReport", "cells_said", "check", "diagrams", "ground_proof", "summary", "violation_findings"]

#: How many boxes of cells a coverage finding names before it says how many more there are.
SHOW_GROUPS = 3


@dataclass
class CheckReport:
    """What a check found, and how much of the domain it verified."""

    files: tuple[SourceFile, ...]
    findings: list[Finding] = field(default_factory=list)
    coverage: Coverage | None = None  #: the proof (``None``: not run, or reused from a certificate)
    seconds: float = 0.0  #: the whole check: loading, analysis and the exhaustive run
    #: what the proof verified (:func:`summary`), whether it ran now or comes from a certificate
    summary: dict[str, Any] | None = None
    reused: bool = False  #: the findings and summary come from the certificate of these files
    #: what the user should know about how the check ran (a certificates folder not trusted)
    notes: list[str] = field(default_factory=list)

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
    subject: Sequence[str] | None = None,
    cache: bool | None = None,
    budget: int = DEFAULT_BUDGET,
    layer: bool | None = None,
) -> CheckReport:
    """Load *files* (every schema problem at once), analyse them and verify their domain.

    :param subject: the files under check (``display`` names), when the others (the shipped
        rules, say) are only the ground they stand on: warnings about rules outside them are
        not the operator's to fix and are left out; errors are kept, located in *subject*
        wherever one of its rules is involved.
    :param cache: reuse and keep certificates (default: unless ``KERNELPOLICY_NO_CACHE`` is on).
    :param budget: the most decision-diagram nodes the proof may make (see :mod:`.mdd`).
    :param layer: prove *subject* on the proof of the files it stands on (:mod:`.layered`):
        ``None``, where that proof is at hand or can be certified; ``True``, also computing it
        when it is not (the language server: every edit stands on it); ``False``, never.
    :raises ~kernelpolicy.analysis.mdd.DiagramTooLarge: the proof passes *budget* nodes.
    """
    from ..dsl.loader import load_files

    start = time.perf_counter()
    if cache is None:
        cache = use_caches()
    # each file is read once: the proof is of these bytes, and so is the certificate's key
    # (a file saved while the check runs never gets the old content's proof under its new key)
    files = pinned(files)
    report = CheckReport(tuple(files))
    key = certificate_key(files, explicit=explicit, subject=subject) if coverage and cache else None
    refused = certificate.refusal() if key is not None else None
    if refused is not None:  # said, not silent: the proof is computed afresh and not kept
        report.notes.append(refused)
        key = None
    if key is not None and _reused(report, key, start):
        return report
    try:
        policy = load_files(files)
    except PolicyError as exc:
        report.findings = [from_diagnostic(d) for d in exc.diagnostics]
        report.seconds = time.perf_counter() - start
        return report
    base = None
    if coverage and subject is not None and layer is not False:
        base = ground_proof(files, policy, subject, explicit=explicit, cache=cache, compute=bool(layer))
    return _verified(report, policy, key, start, _Run(coverage, explicit, subject, budget, base))


def _reused(report: CheckReport, key: str, start: float) -> bool:
    """Fill *report* from the certificate of *key*, where there is one."""
    cert = certificate.read(key)
    if cert is None or cert.findings is None:  # none, or kept as a layer's ground only
        return False
    report.findings, report.summary, report.reused = cert.findings, cert.summary, True
    report.seconds = time.perf_counter() - start
    return True


class _Run(NamedTuple):
    """How one check runs (see :func:`check`'s parameters; *base*: the shipped tables' proof
    the files under check are proven on)."""

    coverage: bool
    explicit: bool
    subject: Sequence[str] | None
    budget: int
    base: Base | None


def ground_proof(
    files: Sequence[SourceFile],
    policy: Policy,
    subject: Sequence[str],
    *,
    explicit: bool = False,
    cache: bool = True,
    compute: bool = False,
) -> Base | None:
    """The proof of the files the layer under check stands on, for :mod:`.layered`: the longest
    run of *files* before a file of *subject* holding an entry of *policy* (the shipped tables,
    and the default policy, which ``check`` with no files certifies). Kept by this process, else
    its certificate, else, with *compute* or a certificate folder to keep it in, computed now
    (the outcomes and their witnesses, without the findings: not the layer's) and kept as a
    certificate of its diagrams only. ``None``: none at hand, or nothing to stand on."""
    from ..dsl.loader import load_files

    mine = set(subject)
    writes = {r.origin.file for r in policy.rules} | {u.origin.file for u in policy.unsupported}
    writes |= {i.origin.file for i in policy.implications}
    writes |= {o.origin.file for orders in policy.orders.values() for o in orders}
    cut = next((i for i, f in enumerate(files) if f.display in mine and f.display in writes), len(files))
    grounds = [files[:i] for i in range(min(cut, len(files) - 1), 0, -1) if files[i].display in mine]
    cache = cache and certificate.refusal() is None
    for ground in grounds:
        key = certificate_key(ground, explicit=explicit, subject=None)  # the bytes *files* were pinned to
        if key is None:
            continue
        hit = layered.kept(key)
        if hit is not None:
            return hit
        cert = certificate.read(key) if cache else None
        if cert is not None and cert.diagrams:
            return layered.keep(key, layered.Base(load_files(ground), explicit, cert.diagrams))
    if not grounds or not (compute or cache):
        return None
    ground = grounds[0]  # computed once, then read by every check that stands on it
    key = certificate_key(ground, explicit=explicit, subject=None)
    try:
        below = load_files(ground)
    except PolicyError:  # the layer's check says what is wrong with the files it stands on
        return None
    # the proof only: the ground's findings (rule usage, prefer conflicts) are not the layer's;
    # its certificate keeps the diagrams, and a check of the ground itself adds the findings
    cov = verify(below, explicit=explicit, usage=False)
    if cov.compiled is None or key is None:
        return None
    if cache:
        certificate.write(certificate.Certificate(key, None, summary(cov), diagrams(cov)))
    base = layered.keep(key, layered.Base(below, explicit, diagrams(cov), dict(cov.witnesses)))
    # the layer is proven in the manager the ground was just proven in, where its levels serve
    layered.adopt(base, cov.domain, cov.compiled.m, {path: cov.compiled.outcome(path) for path in PATHS})
    return base


def _verified(report: CheckReport, policy: Policy, key: str | None, start: float, run: _Run) -> CheckReport:
    """Analyse and verify *policy* (the loaded files of *report*); keep the certificate of *key*."""
    coverage, explicit, subject, budget, base = run
    locator = Locator(report.files)
    report.findings = [from_diagnostic(d) for d in policy.warnings]
    cov = verify(policy, explicit=explicit, budget=budget, base=base) if coverage else None
    domain = cov.domain if cov is not None else build_domain(policy, explicit=explicit)
    report.findings += analyse(policy, cov, locator)
    report.findings += [locator.locate(f, f.field) if f.field else f for f in unknown_release_bounds(policy)]
    # in the proof's manager: what the fixpoint shares with the proof (or with the last edit's) is read again
    located = implication_conflicts(policy, domain, cov.compiled.m if cov is not None and cov.compiled else None)
    if cov is not None:
        report.findings += violation_findings(policy, cov, locator)
        located += unused_unsupported(policy, cov)
        report.coverage = cov
        report.summary = summary(cov)
    report.findings += [locator.locate(f, f.field) if f.field else f for f in located]
    if subject is not None:
        mine = set(subject)
        report.findings = [f for f in report.findings if f.level == "error" or not f.file or f.file in mine]
    report.findings.sort(key=lambda f: (f.level != "error", f.file == "", f.file, f.line, f.column, f.code))
    if key is not None and cov is not None and report.summary is not None:
        certificate.write(certificate.Certificate(key, report.findings, report.summary, diagrams(cov)))
    report.seconds = time.perf_counter() - start
    return report


def diagrams(cov: Coverage) -> dict[str, Any]:
    """Each path's outcome diagram, as the certificate keeps it (:meth:`~.mdd.Manager.export`;
    made once per proof: the certificate and the ground a layer stands on read it)."""
    c = cov.compiled
    if c is None:
        return {}
    if cov.exported is not None:
        return cov.exported
    data = c.m.export({path: c.outcome(path) for path in PATHS})
    data["nodes"] = [
        ["t", list(v[1]) if isinstance(v[1], tuple) else v[1]] if v[0] == "t" else v for v in data["nodes"]
    ]
    data["levels"] = [d.name for d in cov.domain.dims]
    cov.exported = data
    return data


def summary(cov: Coverage) -> dict[str, Any]:
    """What a run verified, as data: cells, dimensions, nodes and distinct outcomes per path,
    witness cells resolved, seconds."""
    return {
        "cells": cov.cells,
        "nodes": dict(cov.nodes),
        "outcomes": dict(cov.outcomes),
        "resolves": cov.resolves,
        "seconds": round(cov.seconds, 3),
        "dimensions": [d.name for d in cov.domain.dims],
        "pruned": len(cov.domain.pruned),
    }


def violation_findings(policy: Policy, cov: Coverage, locator: Locator) -> list[Finding]:
    """The invariants the exhaustive run found broken, one finding per kind, path and rule,
    with the exact number of cells and the first few boxes of them."""
    grouped: dict[tuple[str, str, tuple[str, ...]], list[Violation]] = {}
    seen: dict[str, str] = {}  # a contradiction holds on every path of its cells: count one
    for v in cov.violations:
        if v.code == "contradiction":
            if seen.setdefault(v.message, v.path) != v.path:
                continue
            grouped.setdefault((v.code, v.message, ()), []).append(v)
        else:
            grouped.setdefault((v.code, v.path, v.rules), []).append(v)
    out: list[Finding] = []
    for (code, path, rules), items in grouped.items():  # path: the message, for contradictions
        cells = sum(v.cells for v in items)
        boxes = [g for v in items for g in v.groups]
        shown = "; ".join(g.label() for g in boxes[:SHOW_GROUPS])
        more = sum(v.boxes for v in items) - min(len(boxes), SHOW_GROUPS)
        where = shown + (f"; and {more:,} more boxes of cells" if more > 0 else "")
        first = items[0]
        if code == "no-backend":
            out.append(_no_backend(policy, locator, path, first, where, cells))
            continue
        if code == "contradiction":
            ids = [s for s in _sources(first.message) if s in policy.by_id]
            f = Finding(
                code,
                f"{first.message} in {cells_said(cells)}",
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
            f"{first.message} in {cells_said(cells)}",
            "error",
            rule=rules[0] if rules else None,
            cell=where,
            cells=cells,
        )
        out.append(locator.locate(f, "deny", "require", "requires") if rules else f)
    return out


def _no_backend(policy: Policy, locator: Locator, path: str, first: Violation, where: str, cells: int) -> Finding:
    """A hole, pointed at the rule that made it: an operator's rule where one rejects a backend
    there (operators never edit shipped rules), else the rule that rejects the last backend the
    catalog allows, else the path's catalog."""
    rejecting = [
        policy.by_id[r]
        for c in first.candidates
        for r in c.rules
        if r in policy.by_id and policy.by_id[r].kind != "use"
    ]
    why = "; ".join(f"`{c.backend}` {c.reason or 'is rejected'}" for c in first.candidates)
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
        f"path `{path}` has no valid backend in {cells_said(cells)}",
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
    used = cov.known
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


def cells_said(n: int, what: str = "cell") -> str:
    """*n* cells (or other *what*) as an operator reads them: exact up to a million, else as a
    power of ten (``about 1.5 x 10^35 cells``)."""
    if n < 1_000_000:
        return f"{n:,} {what}" + ("" if n == 1 else "s")
    digits = len(str(n))
    lead = n / 10 ** (digits - 1)
    return f"about {lead:.1f} x 10^{digits - 1} {what}s"


def _sources(message: str) -> list[str]:
    """The backticked names in a contradiction message, in order."""
    parts = message.split("`")
    return [parts[i] for i in range(1, len(parts), 2)]
