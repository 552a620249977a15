"""Plan and run a bench: the decision's candidates per path, each measured on every cell.

Engine-free: the runners (adapters at the edge) and the clock come in as arguments, so the
same code runs the GPU's kernels and the tests' fake ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .protocol import Cell, Clock, Outcome, Prepared, Runner, Settings, measure_cell
from .report import Candidate, CellReport
from .shapes import Layer

if TYPE_CHECKING:
    from ..decision import Decision
    from ..policy import Policy

__all__ = ["Registry", "candidates_of", "paths_of", "run_cells"]

#: path, backend -> the runner of that backend on that path, or None when there is none
Registry = Callable[[str, str], "Runner | None"]


@dataclass
class _NoRunner:
    backend: str
    path: str

    def unavailable(self) -> str | None:
        return f"bench has no runner for `{self.backend}` on {self.path}"

    def prepare(self, cell: Cell) -> Prepared:  # pragma: no cover - never called: unavailable() says why
        raise RuntimeError(self.unavailable())


def candidates_of(decision: Decision, policy: Policy, path: str, *, include_rejected: bool) -> list[Candidate]:
    """The candidates of *path* in the decision's order: the valid ones (chosen or viable), and
    with *include_rejected* the ones a rule rules out, each with the rule behind its verdict."""
    from ..decision import rule_origin

    pd = decision.paths.get(path)
    if pd is None or not pd.applicable:
        return []
    out: list[Candidate] = []
    for c in pd.candidates:
        valid = c.verdict in ("chosen", "viable")
        if not valid and not include_rejected:
            continue
        entry = policy.backends.get(path, {}).get(c.backend)
        if valid:
            rule = entry.rule_id if entry else f"catalog.{path}.{c.backend}"
            origin = str(entry.origin) if entry else ""
            layer = str(entry.origin.layer) if entry else "shipped"
            out.append(Candidate(c.backend, path, True, rule, origin, layer))
            continue
        rule = c.rules[0] if c.rules else "(no rule)"
        found = policy.by_id.get(rule)
        layer = str(found.origin.layer) if found else ("shipped" if rule.startswith("catalog.") else "user")
        out.append(Candidate(c.backend, path, False, rule, rule_origin(policy, rule) or "", layer, c.severity or ""))
    return out


def run_cells(  # noqa: PLR0913 (the run's inputs)
    model: str,
    layers: Sequence[Layer],
    ms: Sequence[int],
    candidates: dict[str, list[Candidate]],
    choices: dict[str, str | None],
    registry: Registry,
    clock: Clock,
    *,
    settings: Settings | None = None,
    progress: Callable[[CellReport], None] | None = None,
) -> list[CellReport]:
    """Measure every candidate of each layer's path on every (layer, M) cell."""
    out: list[CellReport] = []
    for layer in layers:
        cands = candidates.get(layer.path) or []
        if not cands:
            continue
        runners: list[Runner] = [registry(layer.path, c.backend) or _NoRunner(c.backend, layer.path) for c in cands]
        valid = frozenset(c.backend for c in cands if c.valid)
        for m in layer.ms or ms:
            cell = Cell(model, layer, m)
            outcomes: dict[str, Outcome] = measure_cell(cell, runners, clock, settings or Settings())
            report = CellReport(cell, outcomes, choices.get(layer.path), valid)
            out.append(report)
            if progress is not None:
                progress(report)
    return out


def paths_of(layers: Iterable[Layer]) -> list[str]:
    """The paths *layers* touch, in first-seen order."""
    seen: list[str] = []
    for layer in layers:
        if layer.path not in seen:
            seen.append(layer.path)
    return seen
