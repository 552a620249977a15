"""The measurement protocol, free of any engine or array library.

A *runner* (an adapter at the edge: vLLM's ops, DeepGEMM, FlashInfer, torch, Triton) turns one
cell (a layer shape and a token count M) into a :class:`Prepared` call: a function that runs the
kernel the way the engine calls it into an output buffer, one that poisons that buffer (NaN),
and one that gives the relative error of the buffer against a float reference. The protocol:

1. poison the output, run once, synchronise, check: an exception is a failure (``raised``); an
   error that is not finite or above the runner's tolerance is a failure (``wrong``), never a
   time; a partial write leaves NaN behind and fails the same way;
2. time the correct candidates in *passes* rounds, the candidates' order rotated each round
   (drift hits all alike); each round is a :class:`Clock` sample of *reps* timed units after
   *warmup* ones; a round's time is its median;
3. a candidate's time is the median of its rounds, its spread ``(max - min) / median`` of them.

Timed as the engine runs the call (:func:`timing_mode`): M up to the largest size the engine
captures in a CUDA graph is timed as graph replays (the launches' CPU cost is not in the time),
larger M as eager back-to-back calls. No cache flush is timed: the L2 is kept from serving the
weights by *rotation*: the clock asks the candidate for copies of what the call reads
(:attr:`Prepared.replicate`) until the copies together are several times the L2, and one timed
unit runs the call once over each copy, so every call reads its weights from HBM, as a layer does
when the other layers' weights have passed through the cache since its last call.
"""

from __future__ import annotations

import contextlib
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from .shapes import Layer

__all__ = [
    "Cell",
    "Clock",
    "NotRunnable",
    "Outcome",
    "Prepared",
    "Runner",
    "Settings",
    "Status",
    "fastest",
    "measure_cell",
    "timing_mode",
]

Status = Literal["ok", "raised", "wrong", "not_run"]
Mode = Literal["graph", "eager"]

#: The largest batch vLLM 0.26 captures in a CUDA graph by default (``vllm serve``): its capture
#: sizes are 1, 2, 4, 8..248 by 8, 256..max by 16, max = min(2 x max_num_seqs, 512), and
#: ``max_num_seqs`` defaults to 1024 for the API server on a large GPU (vllm/config/vllm.py
#: ``_set_cudagraph_sizes``; vllm/engine/arg_utils.py ``default_max_num_seqs``). Batches above it run
#: eager (piecewise graphs cover the GEMMs only up to that size).
VLLM_GRAPH_MAX_M: Final = 512


@dataclass(frozen=True)
class Cell:
    """One measurement: a layer of one rank at *m* tokens."""

    model: str
    layer: Layer
    m: int


class NotRunnable(Exception):
    """Raised by a runner's ``prepare`` when this machine lacks what the cell needs (a library
    for one range of M): the candidate is not run, which is not a failure of the kernel."""


@dataclass(frozen=True)
class Prepared:
    """One candidate made ready for one cell."""

    run: Callable[[], object]
    poison: Callable[[], None]
    error: Callable[[], float]  #: relative error of the output against the float reference (nan: not finite)
    tolerance: float
    how: str = ""  #: how the engine's call was reproduced (the ops, the scale layout), for the report
    #: a new call over fresh copies of what the call reads (weights, scales, activations), for the
    #: clock's rotation past the L2; None: the call cannot be copied (it runs over one set)
    replicate: Callable[[], Callable[[], object]] | None = None
    footprint: int = 0  #: bytes one call reads from memory (the weights it touches), 0: unknown


class Runner(Protocol):
    """A kernel adapter: one backend id on one path."""

    backend: str
    path: str

    def unavailable(self) -> str | None:
        """Why this runner cannot run here (a missing package or op), else None."""

    def prepare(self, cell: Cell) -> Prepared:
        """The candidate ready to run on *cell*; may raise (the kernel refuses the shape)."""


class Clock(Protocol):
    """Times calls on the device: *reps* samples in seconds per call, each sample one timed unit
    that runs every one of *calls* (copies of one call over different data) in turn."""

    def sync(self) -> None: ...

    def replicas(self, footprint: int) -> int:
        """How many copies of a call reading *footprint* bytes the rotation needs (>= 1)."""

    def samples(self, calls: Sequence[Callable[[], object]], *, warmup: int, reps: int, mode: Mode) -> list[float]: ...


@dataclass(frozen=True)
class Settings:
    """How hard to measure."""

    warmup: int = 5
    reps: int = 20
    passes: int = 3
    mode: Literal["engine", "graph", "eager"] = "engine"  #: engine: graph up to *graph_max_m*, eager above
    graph_max_m: int = VLLM_GRAPH_MAX_M


def timing_mode(m: int, settings: Settings) -> Mode:
    """How the engine runs a call of *m* tokens: in a CUDA graph up to its largest capture size."""
    if settings.mode != "engine":
        return settings.mode
    return "graph" if m <= settings.graph_max_m else "eager"


@dataclass(frozen=True)
class Outcome:
    """What one candidate did on one cell."""

    backend: str
    status: Status
    seconds: float | None = None  #: median over the passes of each pass's median
    spread: float | None = None  #: (max - min) / median of the passes' medians
    error: float | None = None  #: relative error against the float reference
    detail: str = ""  #: the exception's first line, or why it did not run
    how: str = ""
    passes: tuple[float, ...] = field(default=())  #: each pass's median (seconds), every process's in turn
    mode: str = ""  #: graph or eager (ok only)
    replicas: int = 0  #: copies of the call's data the clock rotated over (ok only)
    processes: int = 1  #: processes whose passes are in *passes*

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    head = text[0] if text else ""
    for line in text:  # a CUDA library's status is the useful part of a long message
        if "STATUS_" in line or "not supported" in line.lower():
            head = line.strip()
            break
    head = re.sub(r"(when calling `\w+)\(.*\)`", r"\1(...)`", head)  # cuBLAS prints every argument
    return f"{type(exc).__name__}: {head}"[:300]


def _check(backend: str, prepared: Prepared, clock: Clock) -> Outcome | None:
    """The correctness step; an :class:`Outcome` when the candidate failed, else None."""
    prepared.poison()
    prepared.run()
    clock.sync()
    err = prepared.error()
    if not math.isfinite(err):
        return Outcome(
            backend, "wrong", error=err, detail="output not finite (unwritten or overflowed)", how=prepared.how
        )
    if err > prepared.tolerance:
        detail = f"relative error {err:.2e} > {prepared.tolerance:.0e}"
        return Outcome(backend, "wrong", error=err, detail=detail, how=prepared.how)
    return None


def measure_cell(  # noqa: PLR0912 (the protocol's steps, each with its failure)
    cell: Cell, runners: Sequence[Runner], clock: Clock, settings: Settings | None = None
) -> dict[str, Outcome]:
    """Every runner's :class:`Outcome` on *cell*, by backend id (the protocol in the module doc)."""
    settings = settings or Settings()
    out: dict[str, Outcome] = {}
    ready: dict[str, Prepared] = {}
    errors: dict[str, float] = {}
    for runner in runners:
        why = runner.unavailable()
        if why is not None:
            out[runner.backend] = Outcome(runner.backend, "not_run", detail=why)
            continue
        try:
            prepared = runner.prepare(cell)
            failed = _check(runner.backend, prepared, clock)
        except NotRunnable as exc:
            out[runner.backend] = Outcome(runner.backend, "not_run", detail=str(exc))
            continue
        except Exception as exc:  # the kernel's refusal is a result, not a crash of bench
            _recover(clock)
            out[runner.backend] = Outcome(runner.backend, "raised", detail=_first_line(exc))
            continue
        if failed is not None:
            out[runner.backend] = failed
            continue
        ready[runner.backend] = prepared
        errors[runner.backend] = prepared.error()
    rounds: dict[str, list[float]] = {name: [] for name in ready}
    names = list(ready)
    mode = timing_mode(cell.m, settings)
    calls: dict[str, list[Callable[[], object]]] = {}
    for name in names:
        try:
            calls[name] = _rotation(ready[name], clock)
        except Exception as exc:
            _recover(clock)
            out[name] = Outcome(name, "raised", detail=_first_line(exc) + " (copying its data)", how=ready[name].how)
    for p in range(settings.passes):
        turn = names[p % len(names) :] + names[: p % len(names)] if names else []
        for name in turn:
            if name in out:
                continue
            try:
                samples = clock.samples(calls[name], warmup=settings.warmup, reps=settings.reps, mode=mode)
            except Exception as exc:
                _recover(clock)
                out[name] = Outcome(
                    name, "raised", detail=_first_line(exc) + f" (while timed, {mode})", how=ready[name].how
                )
                continue
            rounds[name].append(statistics.median(samples))
    for name, prepared in ready.items():
        if name in out:
            continue
        medians = rounds[name]
        t = statistics.median(medians)
        spread = (max(medians) - min(medians)) / t if t > 0 else 0.0
        out[name] = Outcome(
            name,
            "ok",
            seconds=t,
            spread=spread,
            error=errors[name],
            how=prepared.how,
            passes=tuple(medians),
            mode=mode,
            replicas=len(calls[name]),
        )
    return {r.backend: out[r.backend] for r in runners}


def _rotation(prepared: Prepared, clock: Clock) -> list[Callable[[], object]]:
    """The call and as many copies over fresh data as the clock's rotation past the L2 needs."""
    if prepared.replicate is None:
        return [prepared.run]
    want = clock.replicas(prepared.footprint)
    return [prepared.run] + [prepared.replicate() for _ in range(want - 1)]


def _recover(clock: Clock) -> None:
    """After a kernel raised: let the device settle (an asynchronous error surfaces here)."""
    with contextlib.suppress(Exception):
        clock.sync()


def fastest(outcomes: Mapping[str, Outcome]) -> Outcome | None:
    """The fastest correct outcome, else None."""
    ok = [o for o in outcomes.values() if o.ok and o.seconds is not None]
    return min(ok, key=lambda o: o.seconds or 0.0) if ok else None
