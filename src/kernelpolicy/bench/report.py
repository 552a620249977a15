"""Rank what was measured against the decision, and say it: text and ``kernelpolicy.bench/1``.

Pure: takes the decision's candidates (:class:`Candidate`), the cells' outcomes and the run's
context, returns plain data and text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .protocol import Cell, Outcome, fastest
from .shapes import Layer

__all__ = ["SCHEMA_ID", "Candidate", "CellReport", "Failure", "Report", "render_text", "separated"]

SCHEMA_ID: Final = "kernelpolicy.bench/1"


def separated(slow: Outcome, fast: Outcome, threshold: float = 0.0) -> bool:
    """*fast* beats *slow* beyond the measured noise: every pass time of *slow* (each pass's median,
    over all repeats and processes) is above every pass time of *fast*, and the medians differ by
    more than *threshold* (0.03: 3 %). An outcome without pass times counts its one time."""
    if not (slow.ok and fast.ok and slow.seconds and fast.seconds):
        return False
    lo = min(slow.passes) if slow.passes else slow.seconds
    hi = max(fast.passes) if fast.passes else fast.seconds
    return lo > hi and slow.seconds / fast.seconds - 1.0 > threshold


@dataclass(frozen=True)
class Candidate:
    """A backend the decision considered on a path, and the rule behind its verdict.

    *valid*: the decision calls it valid (chosen or viable); *rule* is then the catalog entry
    that admits it (``catalog.dense.torch``), else the first rule that rules it out; *origin* is
    that rule's ``file:line`` and *layer* its layer (``shipped``, ``policy``, ``user``).
    """

    backend: str
    path: str
    valid: bool
    rule: str
    origin: str = ""
    layer: str = "shipped"
    severity: str = ""

    def cite(self) -> str:
        where = f" ({self.origin})" if self.origin else ""
        return f"{self.rule}{where}"


@dataclass(frozen=True)
class Failure:
    """A candidate that raised or was wrong on a cell."""

    cell: Cell
    outcome: Outcome
    candidate: Candidate

    @property
    def contradicts_shipped(self) -> bool:
        """A shipped rule calls it valid here, and it failed."""
        return self.candidate.valid and self.candidate.layer == "shipped"

    def line(self, *, saved: bool = False) -> str:
        """The failure on one line; *saved*: read from a saved report, whose failure this process did
        not see (a bench of that day may have been at fault: re-run before acting on it)."""
        c = self.candidate
        verdict = f"valid by {c.cite()}" if c.valid else f"ruled out by {c.cite()}"
        if not self.contradicts_shipped:
            tag = ""
        elif saved:
            tag = "  failed where a shipped rule calls it valid (a saved report: re-run bench to confirm it)"
        else:
            tag = "  CONTRADICTS A SHIPPED RULE"
        return f"{c.backend} {self.outcome.status}: {self.outcome.detail} [{verdict}]{tag}"


@dataclass(frozen=True)
class CellReport:
    """One cell: every candidate's outcome, the fastest correct one, the decision's choice."""

    cell: Cell
    outcomes: Mapping[str, Outcome]
    choice: str | None  #: the decision's backend on this cell's path
    valid: frozenset[str] = frozenset()  #: the backends the decision calls valid on this path

    @property
    def best(self) -> Outcome | None:
        """The fastest correct candidate the decision calls valid (ruled-out ones are not options)."""
        return fastest({b: o for b, o in self.outcomes.items() if b in self.valid})

    @property
    def best_any(self) -> Outcome | None:
        """The fastest correct candidate, ruled out or not."""
        return fastest(self.outcomes)

    @property
    def loss(self) -> float | None:
        """How much longer the decision's choice takes than the fastest valid one (0.05: 5 %);
        ``inf`` when the choice failed, None when it was not measured."""
        best = self.best
        chosen = self.outcomes.get(self.choice or "")
        if chosen is None or chosen.status == "not_run":
            return None
        if not chosen.ok:
            return math.inf
        if best is None or not best.seconds or chosen.seconds is None:
            return None
        return chosen.seconds / best.seconds - 1.0

    @property
    def mode(self) -> str:
        """How the cell was timed (graph or eager), from its correct outcomes; "" when none ran."""
        modes = sorted({o.mode for o in self.outcomes.values() if o.ok and o.mode})
        return "/".join(modes)

    @property
    def timed_in_passes(self) -> bool:
        """Its outcomes carry their pass times (reports from 2026-12-05 on), so the noise is known."""
        return any(o.passes for o in self.outcomes.values())

    @property
    def beyond_noise(self) -> bool | None:
        """Whether the choice's loss exceeds the noise: every one of its pass times (all processes)
        is slower than every pass time of the fastest valid candidate. None: no loss measured."""
        loss, best = self.loss, self.best
        chosen = self.outcomes.get(self.choice or "")
        if loss is None or math.isinf(loss) or best is None or chosen is None or loss <= 0:
            return None if loss is None or math.isinf(loss) else False
        return separated(chosen, best)


@dataclass(frozen=True)
class Report:
    """A bench run: its context, the candidates per path, every cell."""

    model: str
    context: Mapping[str, Any]  #: machine, versions, date, deployment, protocol, decision
    candidates: Mapping[str, Sequence[Candidate]]  #: path -> in the decision's order
    cells: Sequence[CellReport]

    def candidate(self, path: str, backend: str) -> Candidate:
        for c in self.candidates.get(path, ()):
            if c.backend == backend:
                return c
        return Candidate(backend, path, valid=False, rule="(not a candidate)")

    def failures(self) -> list[Failure]:
        out = []
        for cr in self.cells:
            for o in cr.outcomes.values():
                if o.status in ("raised", "wrong"):
                    out.append(Failure(cr.cell, o, self.candidate(cr.cell.layer.path, o.backend)))
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        """A report read back from :meth:`to_json`'s output (``bench --report FILE``).

        Every field is checked for the type :meth:`to_json` writes (a number finite, a time not
        negative), so a report edited by hand or by another program is refused with the field's
        place, never half read.

        :raises KeyError, TypeError, ValueError: *data* is not a ``kernelpolicy.bench/1`` report.
        """
        if not isinstance(data, Mapping):
            raise ValueError("not a JSON object")
        if data.get("schema") != SCHEMA_ID:
            raise ValueError(f"not a `{SCHEMA_ID}` report (schema `{str(data.get('schema'))[:80]}`)")
        _check_report(data)
        candidates = {
            path: [
                Candidate(
                    c["backend"], path, bool(c["valid"]), c["rule"], c.get("origin", ""), c.get("layer", "shipped")
                )
                for c in cs
            ]
            for path, cs in data["candidates"].items()
        }
        cells = []
        for c in data["cells"]:
            layer = Layer(
                c["path"],
                c["layer"],
                int(c["n"]),
                int(c["k"]),
                int(c.get("experts", 1)),
                c.get("note", ""),
                int(c.get("topk", 0)),
                int(c.get("total_experts", 0)),
                kv_heads=int(c.get("kv_heads", 0)),
                phase=str(c.get("phase", "")),
                context=int(c.get("context", 0)),
                kv_dtype=str(c.get("kv_dtype", "")),
            )
            outcomes = {
                o["backend"]: Outcome(
                    o["backend"],
                    o["status"],
                    seconds=o["us"] * 1e-6 if o.get("us") is not None else None,
                    spread=o.get("spread"),
                    error=o.get("error"),
                    detail=o.get("detail", ""),
                    how=o.get("how", ""),
                    passes=tuple(x * 1e-6 for x in o.get("passes_us", ())),
                    mode=o.get("mode", ""),
                    replicas=int(o.get("replicas", 0)),
                    processes=int(o.get("processes", 1)),
                )
                for o in c["outcomes"]
            }
            valid = frozenset(x.backend for x in candidates.get(c["path"], []) if x.valid)
            cells.append(CellReport(Cell(data["model"], layer, int(c["m"])), outcomes, c.get("choice"), valid))
        skip = {"schema", "model", "candidates", "cells", "failures"}
        context = {k: v for k, v in data.items() if k not in skip}
        return cls(model=data["model"], context=context, candidates=candidates, cells=cells)

    def to_json(self) -> dict[str, Any]:
        cands = {
            path: [
                {"backend": c.backend, "valid": c.valid, "rule": c.rule, "origin": c.origin, "layer": c.layer}
                for c in cs
            ]
            for path, cs in self.candidates.items()
        }
        cells = []
        for cr in self.cells:
            layer = cr.cell.layer
            best, loss = cr.best, cr.loss
            cells.append(
                {
                    "path": layer.path,
                    "layer": layer.name,
                    "n": layer.n,
                    "k": layer.k,
                    "experts": layer.experts,
                    "note": layer.note,
                    **({"topk": layer.topk, "total_experts": layer.total_experts} if layer.path == "moe" else {}),
                    **(
                        {
                            "kv_heads": layer.kv_heads,
                            "phase": layer.phase,
                            "context": layer.context,
                            "kv_dtype": layer.kv_dtype,
                        }
                        if layer.path == "attention"
                        else {}
                    ),
                    "m": cr.cell.m,
                    "choice": cr.choice,
                    "fastest": best.backend if best else None,
                    "fastest_any": cr.best_any.backend if cr.best_any else None,
                    "loss": None if loss is None else (None if math.isinf(loss) else round(loss, 4)),
                    "choice_failed": loss is not None and math.isinf(loss),
                    **({"mode": cr.mode} if cr.mode else {}),
                    **({"beyond_noise": cr.beyond_noise} if cr.timed_in_passes else {}),
                    "outcomes": [_outcome_json(o) for o in cr.outcomes.values()],
                }
            )
        failures = [
            {
                "path": f.cell.layer.path,
                "layer": f.cell.layer.name,
                "m": f.cell.m,
                "backend": f.outcome.backend,
                "status": f.outcome.status,
                "detail": f.outcome.detail,
                "valid": f.candidate.valid,
                "rule": f.candidate.rule,
                "origin": f.candidate.origin,
                "contradicts_shipped": f.contradicts_shipped,
            }
            for f in self.failures()
        ]
        return {
            "schema": SCHEMA_ID,
            "model": self.model,
            **dict(self.context),
            "candidates": cands,
            "cells": cells,
            "failures": failures,
        }


_STATUSES: Final = ("ok", "raised", "wrong", "not_run")
_Scalar = (str, int, float, bool, type(None))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _field(where: str, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"`{where}` must be {what}")


def _fields(obj: Mapping[str, Any], where: str, spec: Mapping[str, tuple[str, bool]]) -> None:
    """Each key of *spec* in *obj*: (kind, required); kinds: str, bool, count (int >= 1),
    index (int >= 0), time (finite number >= 0, or null), str? (str or null)."""
    for key, (kind, required) in spec.items():
        here = f"{where}.{key}" if where else key
        if key not in obj:
            if required:
                raise KeyError(here)
            continue
        v = obj[key]
        if kind == "str":
            _field(here, isinstance(v, str), "a string")
        elif kind == "str?":
            _field(here, v is None or isinstance(v, str), "a string or null")
        elif kind == "bool":
            _field(here, isinstance(v, bool), "true or false")
        elif kind == "count":
            _field(here, isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number of at least 1")
        elif kind == "index":
            _field(here, isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number of at least 0")
        elif kind == "time":
            _field(here, v is None or (_number(v) and v >= 0), "a finite number of at least 0, or null")
        elif kind == "times":
            ok = isinstance(v, list) and all(_number(x) and x >= 0 for x in v)
            _field(here, ok, "a list of finite numbers of at least 0")


def _check_context(data: Mapping[str, Any]) -> None:
    _fields(data, "", {"model": ("str", True), "machine": ("str", False), "date": ("str", False)})
    for key in ("versions", "runners", "decision", "deployment", "protocol", "facts"):
        if key not in data:
            continue
        value = data[key]
        _field(key, isinstance(value, Mapping), "an object")
        for k, v in value.items():
            flat = isinstance(v, _Scalar) and (not isinstance(v, float) or math.isfinite(v))
            listed = key == "facts" and isinstance(v, list) and all(isinstance(x, _Scalar) for x in v)
            _field(f"{key}.{k}", flat or listed, "a string, number, boolean or null")


#: The fields of a report's entries (see :func:`_fields`).
_CANDIDATE: Final = {
    "backend": ("str", True), "valid": ("bool", True), "rule": ("str", True), "origin": ("str", False),
    "layer": ("str", False),
}  # fmt: skip
_CELL: Final = {
    "path": ("str", True), "layer": ("str", True), "n": ("count", True), "k": ("count", True),
    "m": ("count", True), "experts": ("count", False), "note": ("str", False), "topk": ("index", False),
    "total_experts": ("index", False), "choice": ("str?", False),
}  # fmt: skip
_OUTCOME: Final = {
    "backend": ("str", True), "us": ("time", False), "spread": ("time", False), "error": ("time", False),
    "detail": ("str", False), "how": ("str", False), "passes_us": ("times", False), "mode": ("str", False),
    "replicas": ("index", False), "processes": ("count", False),
}  # fmt: skip


def _check_report(data: Mapping[str, Any]) -> None:
    """:raises KeyError, ValueError: the first field of *data* that is not what
    :meth:`Report.to_json` writes."""
    _check_context(data)
    if "candidates" not in data:
        raise KeyError("candidates")
    candidates: Any = data["candidates"]
    _field("candidates", isinstance(candidates, Mapping), "an object of paths")
    for path, cs in candidates.items():
        _field(f"candidates.{path}", isinstance(cs, list), "a list")
        for i, c in enumerate(cs):
            _field(f"candidates.{path}[{i}]", isinstance(c, Mapping), "an object")
            _fields(c, f"candidates.{path}[{i}]", _CANDIDATE)
    if "cells" not in data:
        raise KeyError("cells")
    _field("cells", isinstance(data["cells"], list), "a list")
    for i, c in enumerate(data["cells"]):
        where = f"cells[{i}]"
        _field(where, isinstance(c, Mapping), "an object")
        _fields(c, where, _CELL)
        _field(f"{where}.outcomes", isinstance(c.get("outcomes"), list), "a list")
        for j, o in enumerate(c["outcomes"]):
            _field(f"{where}.outcomes[{j}]", isinstance(o, Mapping), "an object")
            _fields(o, f"{where}.outcomes[{j}]", _OUTCOME)
            _field(f"{where}.outcomes[{j}].status", o.get("status") in _STATUSES, f"one of {', '.join(_STATUSES)}")


def _outcome_json(o: Outcome) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": o.backend, "status": o.status}
    if o.seconds is not None:
        out["us"] = round(o.seconds * 1e6, 3)
    if o.spread is not None:
        out["spread"] = round(o.spread, 4)
    if o.error is not None and math.isfinite(o.error):
        out["error"] = float(f"{o.error:.3g}")
    if o.detail:
        out["detail"] = o.detail
    if o.how:
        out["how"] = o.how
    if o.passes:
        out["passes_us"] = [round(x * 1e6, 3) for x in o.passes]
    if o.mode:
        out["mode"] = o.mode
    if o.replicas:
        out["replicas"] = o.replicas
    if o.processes != 1:
        out["processes"] = o.processes
    return out


def _us(o: Outcome) -> str:
    if o.ok and o.seconds is not None:
        return f"{o.seconds * 1e6:.1f}"
    return {"raised": "raised", "wrong": "WRONG", "not_run": "-"}.get(o.status, o.status)


def _loss(loss: float | None, beyond: bool | None = True) -> str:
    if loss is None:
        return "n/a"
    if math.isinf(loss):
        return "FAILED"
    if loss <= 0:
        return "best"
    return f"+{loss * 100:.1f}%" + ("" if beyond is not False else " ~")


def _header(report: Report) -> list[str]:
    ctx = report.context
    lines = [f"bench   {report.model} on {ctx.get('machine', '?')} ({ctx.get('date', '?')})"]
    dep = ctx.get("deployment") or {}
    if dep:
        lines.append("deploy  " + ", ".join(f"{k} {v}" for k, v in dep.items()))
    versions = ctx.get("versions") or {}
    if versions:
        lines.append("with    " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    proto = ctx.get("protocol") or {}
    if proto and "l2_flush_bytes" in proto:  # reports before 2026-12-05: eager calls after a flush
        lines.append(
            f"timing  median of {proto.get('passes')} passes x {proto.get('reps')} calls"
            f" (L2 flushed before each, {proto.get('warmup')} warm-ups); times in us; spread = pass range / median"
        )
    elif proto:
        procs = proto.get("processes", 1)
        lines.append(
            f"timing  median of {proto.get('passes')} passes x {proto.get('reps')} units in each of {procs}"
            f" process{'es' if procs != 1 else ''}; {proto.get('mode', 'engine')} mode (CUDA graph replay for"
            f" M <= {proto.get('graph_max_m')}, eager above); data rotated over copies of {proto.get('l2_multiple')}x"
            " the L2, no flush"
            + ("; the device kept busy while the host enqueues" if proto.get("host_ahead_us_per_call") else "")
            + "; times in us"
        )
        lines.append(
            "        loss `~` = within the noise (the choice's and the fastest's pass times overlap, over every"
            " pass of every process)"
        )
    return lines


def _path_tables(path: str, cands: Sequence[Candidate], cells: list[CellReport]) -> list[str]:
    ran = {b for c in cells for b, o in c.outcomes.items() if o.status != "not_run"}
    names = [c.backend for c in cands if c.backend in ran]
    idle = [c.backend for c in cands if c.backend not in ran]
    chosen = cells[0].choice
    order = " > ".join(("*" if c.backend == chosen else "") + c.backend + ("" if c.valid else " (x)") for c in cands)
    lines = ["", f"{path:<7} decision {chosen or '-'}; candidates {order}"]
    if idle:
        why = {o.detail for c in cells for b, o in c.outcomes.items() if b in idle and o.detail}
        lines.append(f"        not run: {', '.join(idle)} ({'; '.join(sorted(why))})")
    layers: dict[str, list[CellReport]] = {}
    for c in cells:
        layers.setdefault(c.cell.layer.label(), []).append(c)
    width = max(9, *(len(n) for n in names)) if names else 9
    for label, rows in layers.items():
        note = rows[0].cell.layer.note
        lines.append(f"  {label}{'  [' + note + ']' if note else ''}")
        head = "    " + f"{'M':>6}  " + "  ".join(f"{n:>{width}}" for n in names)
        moded = any(r.mode for r in rows)  # reports before 2026-12-05 have no timing mode
        lines.append(head + ("  mode   " if moded else "  ") + "fastest / choice's loss")
        for r in rows:
            vals = "  ".join(f"{_us(r.outcomes[n]) if n in r.outcomes else '-':>{width}}" for n in names)
            best = r.best
            mode = f"{r.mode or '-':<5}  " if moded else ""
            beyond = r.beyond_noise if r.timed_in_passes else None
            lines.append(f"    {r.cell.m:>6}  {vals}  {mode}{best.backend if best else '-'} / {_loss(r.loss, beyond)}")
    return lines


def _failures(report: Report, saved: bool) -> list[str]:
    failures = report.failures()
    if not failures:
        return []
    lines = ["", "failures (a failure is not a time):"]
    seen: dict[tuple[str, str, str], list[str]] = {}
    for f in failures:
        key = (f.cell.layer.path, f.outcome.backend, f.line(saved=saved))
        seen.setdefault(key, []).append(f"{f.cell.layer.name}@M={f.cell.m}")
    for (path, _, text), where in seen.items():
        lines.append(f"  x {path} {text}")
        lines.append(f"      on {', '.join(where)}")
    return lines


def _summary(report: Report) -> list[str]:
    losses = [c.loss for c in report.cells if c.loss is not None]
    if not losses:
        return []
    finite = [x for x in losses if math.isfinite(x)]
    within = sum(1 for x in finite if x <= 0.02)
    worst = max(finite) if finite else 0.0
    lines = [
        "",
        f"summary the decision's choice is the fastest valid candidate or within 2% in {within} of"
        f" {len(losses)} cells; worst loss {worst * 100:.1f}%; failed in {len(losses) - len(finite)}",
    ]
    if any(o.passes for c in report.cells for o in c.outcomes.values()):
        beyond = [c for c in report.cells if c.beyond_noise]
        lines.append(
            f"        beyond the noise the choice loses in {len(beyond)} of {len(losses)} cells"
            + (": " + ", ".join(f"{c.cell.layer.name}@M={c.cell.m} +{(c.loss or 0) * 100:.1f}%" for c in beyond))
            if beyond
            else f"        beyond the noise the choice loses in 0 of {len(losses)} cells"
        )
    return lines


def render_text(report: Report, *, saved: bool = False) -> str:
    """The report for a terminal: per path and layer a table of M rows, then the failures (*saved*:
    re-rendered from a saved report, see :meth:`Failure.line`)."""
    lines = _header(report)
    for path, cands in report.candidates.items():
        cells = [c for c in report.cells if c.cell.layer.path == path]
        if cells:
            lines += _path_tables(path, cands, cells)
    return "\n".join(lines + _failures(report, saved) + _summary(report))
