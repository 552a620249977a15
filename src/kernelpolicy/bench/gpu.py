"""The GPU edge of bench: build the runners, run the plan, assemble the report's context."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .protocol import Settings
from .report import Candidate, CellReport, Report
from .run import run_cells
from .shapes import Layer

if TYPE_CHECKING:
    from ..decision import Decision

__all__ = ["bench_on_gpu", "parallel_size"]


def _progress(cr: CellReport) -> None:
    parts = []
    for o in cr.outcomes.values():
        if o.ok and o.seconds is not None:
            parts.append(f"{o.backend}={o.seconds * 1e6:.1f}us")
        elif o.status != "not_run":
            parts.append(f"{o.backend}={o.status.upper()}")
    print(f"kernelpolicy: bench {cr.cell.layer.label()} M={cr.cell.m}: {' '.join(parts)}", file=sys.stderr, flush=True)


def parallel_size(value: object) -> int:
    """A parallel size fact (TP, EP): its value, 1 when unknown."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def bench_on_gpu(
    *,
    model: str,
    decision: Decision,
    layers: Sequence[Layer],
    ms: Sequence[int],
    candidates: dict[str, list[Candidate]],
    settings: Settings,
    quiet: bool = False,
) -> Report:
    """Measure *candidates* on *layers* x *ms* on this process's GPU (torch imported here)."""
    from ._runners import Env, registry
    from ._torch import HOST_SECONDS_PER_CALL, L2_MULTIPLE, MAX_REPLICAS, MIN_UNIT_CALLS, CudaClock, load_torch

    torch = load_torch()
    torch.backends.cuda.matmul.allow_tf32 = False
    env = Env(torch)
    clock = CudaClock(torch)
    choices = {p: d.backend for p, d in decision.paths.items() if p != "warmup"}
    cells = run_cells(
        model,
        layers,
        ms,
        candidates,
        choices,
        registry(env),
        clock,
        settings=settings,
        progress=None if quiet else _progress,
    )
    props = torch.cuda.get_device_properties(0)
    facts = decision.facts.values
    context: dict[str, Any] = {
        "machine": f"{props.name} (cc {props.major}.{props.minor}, {props.multi_processor_count} SMs)",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": env.versions(),
        "runners": env.runners_status(),
        "deployment": {"tp": parallel_size(facts.get("deploy.tp")), "ep": parallel_size(facts.get("deploy.ep"))},
        "protocol": {
            "warmup": settings.warmup,
            "reps": settings.reps,
            "passes": settings.passes,
            "processes": 1,
            "mode": settings.mode,
            "graph_max_m": settings.graph_max_m,
            "l2_bytes": clock.l2_bytes,
            "l2_multiple": L2_MULTIPLE,
            "max_replicas": MAX_REPLICAS,
            "min_unit_calls": MIN_UNIT_CALLS,
            "host_ahead_us_per_call": round(HOST_SECONDS_PER_CALL * 1e6),
        },
        "decision": dict(choices.items()),
        "fingerprint": decision.fingerprint,
        "facts": {k: facts.get(k) for k in ("gpu.sm", "quant.scheme", "model.type", "deploy.tp") if k in facts},
    }
    return Report(model=model, context=context, candidates=candidates, cells=cells)
