"""Several bench runs as one measurement, and where one candidate beats another beyond the noise.

Pure. A bench process times every cell in passes; the noise a ranking must beat is the spread of
those pass times over the passes *and* over processes (a process that started on a slower machine
state is slower throughout, which no number of passes inside one process shows). :func:`combine`
merges the reports of the same plan run in separate processes; :func:`preferences` finds, per
path, the valid candidate faster than the decision's choice beyond that noise and the range of M
where that holds from the smallest M up (a deployment sees every M from 1 to its
``--max-num-batched-tokens``, so a preference holds for it only when it holds on all of them).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .protocol import Outcome
from .report import CellReport, Report, separated

__all__ = ["Preference", "Verdict", "combine", "path_verdicts", "preferences", "processes_of"]


def processes_of(report: Report) -> int:
    """How many processes' passes the report holds (1 for a single run)."""
    proto = report.context.get("protocol") or {}
    value = proto.get("processes", 1) if isinstance(proto, dict) else 1
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def _merge(outcomes: Sequence[Outcome], processes: Sequence[int]) -> Outcome:
    failed = [o for o in outcomes if o.status in ("raised", "wrong")]
    if failed:  # a failure in one process is a failure: say in how many it happened
        first = failed[0]
        return replace(first, detail=f"{first.detail} (in {len(failed)} of {len(outcomes)} processes)")
    ok = [(o, n) for o, n in zip(outcomes, processes, strict=True) if o.ok and o.seconds is not None]
    if not ok:
        return outcomes[0]
    passes = tuple(x for o, _ in ok for x in (o.passes or (o.seconds or 0.0,)))
    t = statistics.median(passes)
    errors = [o.error for o, _ in ok if o.error is not None]
    head = ok[0][0]
    return replace(
        head,
        seconds=t,
        spread=(max(passes) - min(passes)) / t if t > 0 else 0.0,
        error=max(errors) if errors else None,
        passes=passes,
        processes=sum(n for _, n in ok),
    )


def combine(reports: Sequence[Report]) -> Report:
    """One report from runs of the same plan in separate processes (the cells of the first, in its
    order, then any the others add); each candidate's pass times are every process's in turn.

    :raises ValueError: no report, or reports of different models or decisions.
    """
    if not reports:
        raise ValueError("no report to combine")
    first = reports[0]
    if len(reports) == 1:
        return first
    for r in reports[1:]:
        if r.model != first.model:
            raise ValueError(f"reports of different models: `{first.model}` and `{r.model}`")
        a, b = first.context.get("fingerprint"), r.context.get("fingerprint")
        if a and b and a != b:
            raise ValueError(f"reports of different decisions for `{first.model}` (fingerprints {a} and {b})")
    order: list[tuple[str, str, int]] = []
    found: dict[tuple[str, str, int], list[tuple[CellReport, int]]] = {}
    for r in reports:
        n = processes_of(r)
        for cr in r.cells:
            key = (cr.cell.layer.path, cr.cell.layer.name, cr.cell.m)
            if key not in found:
                order.append(key)
                found[key] = []
            found[key].append((cr, n))
    cells = []
    for key in order:
        runs = found[key]
        head = runs[0][0]
        backends: list[str] = []
        for cr, _ in runs:
            backends += [b for b in cr.outcomes if b not in backends]
        merged = {}
        for b in backends:
            have = [(cr.outcomes[b], n) for cr, n in runs if b in cr.outcomes]
            merged[b] = _merge([o for o, _ in have], [n for _, n in have])
        cells.append(CellReport(head.cell, merged, head.choice, head.valid))
    context: dict[str, Any] = dict(first.context)
    proto = dict(context.get("protocol") or {})
    proto["processes"] = sum(processes_of(r) for r in reports)
    context["protocol"] = proto
    dates = [str(r.context.get("date", "?")) for r in reports]
    context["date"] = dates[0] if len(set(dates)) == 1 else f"{dates[0]} .. {dates[-1]}"
    return Report(model=first.model, context=context, candidates=first.candidates, cells=cells)


@dataclass(frozen=True)
class Verdict:
    """A candidate against the choice on one path at one M, over all the path's layers (their
    times summed pass by pass): ``faster`` or ``slower`` beyond the noise, ``tie`` within it, or
    ``unmeasured`` (a layer where either did not run correctly)."""

    m: int
    verdict: str
    gain: float | None = None  #: choice's total / candidate's total - 1


def _total(cells: Sequence[CellReport], backend: str) -> Outcome | None:
    """*backend*'s time over *cells* (one path's layers at one M): pass times summed pass by pass."""
    outs = [c.outcomes.get(backend) for c in cells]
    if not outs or any(o is None or not o.ok or o.seconds is None for o in outs):
        return None
    ok = [o for o in outs if o is not None]
    counts = {len(o.passes) for o in ok}
    if len(counts) == 1 and 0 not in counts:
        passes = tuple(sum(o.passes[i] for o in ok) for i in range(counts.pop()))
    else:  # unequal pass counts cannot be paired: the medians alone
        passes = (sum(o.seconds or 0.0 for o in ok),)
    return Outcome(backend, "ok", seconds=sum(o.seconds or 0.0 for o in ok), passes=passes)


def path_verdicts(report: Report, path: str, backend: str, threshold: float) -> list[Verdict]:
    """*backend* against the decision's choice on *path*, per measured M (ascending)."""
    cells = [c for c in report.cells if c.cell.layer.path == path]
    choice = cells[0].choice if cells else None
    out = []
    for m in sorted({c.cell.m for c in cells}):
        at = [c for c in cells if c.cell.m == m]
        mine, theirs = _total(at, backend), _total(at, choice or "")
        if mine is None or theirs is None or not mine.seconds or not theirs.seconds:
            out.append(Verdict(m, "unmeasured"))
            continue
        gain = theirs.seconds / mine.seconds - 1.0
        if separated(theirs, mine, threshold):
            out.append(Verdict(m, "faster", gain))
        elif separated(mine, theirs, threshold):
            out.append(Verdict(m, "slower", gain))
        else:
            out.append(Verdict(m, "tie", gain))
    return out


@dataclass(frozen=True)
class Preference:
    """A valid candidate faster than the choice beyond the noise, for every M up to *up_to*."""

    path: str
    backend: str
    choice: str
    up_to: int  #: the largest measured M of the window (it starts at M = 1)
    verdicts: tuple[Verdict, ...]  #: the window's

    @property
    def faster_at(self) -> list[int]:
        return [v.m for v in self.verdicts if v.verdict == "faster"]


def preferences(report: Report, threshold: float) -> list[Preference]:
    """Per path at most one :class:`Preference`: a candidate the decision calls valid that is
    faster than its choice beyond the noise (and by more than *threshold*) on at least one M, and
    not slower beyond it on any M from 1 up to the window's end; the widest window wins, then the
    larger gain. None from a report of fewer than two processes: the noise across processes is
    not measured there."""
    if processes_of(report) < 2:
        return []
    out = []
    for path, cands in report.candidates.items():
        cells = [c for c in report.cells if c.cell.layer.path == path]
        if not cells or cells[0].choice is None or min(c.cell.m for c in cells) != 1:
            continue
        choice = cells[0].choice
        best: Preference | None = None
        for cand in cands:
            if not cand.valid or cand.backend == choice:
                continue
            window: list[Verdict] = []
            for v in path_verdicts(report, path, cand.backend, threshold):
                if v.verdict not in ("faster", "tie"):
                    break
                window.append(v)
            while window and window[-1].verdict == "tie":  # the window ends at its last win
                window.pop()
            if not any(v.verdict == "faster" for v in window):
                continue
            pref = Preference(path, cand.backend, choice, window[-1].m, tuple(window))
            gain = sum(v.gain or 0.0 for v in window)
            if best is None or (pref.up_to, gain) > (best.up_to, sum(v.gain or 0.0 for v in best.verdicts)):
                best = pref
        if best is not None:
            out.append(best)
    return out
