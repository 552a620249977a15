"""bench's measurement protocol and ranking, with fake kernels on the CPU (no torch).

A fake kernel writes into a list, costs a known number of seconds on a fake clock, and can be
made wrong, raising, partial or slow; the protocol must catch each for what it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from kernelpolicy.bench import (
    Candidate,
    Cell,
    Layer,
    NotRunnable,
    Prepared,
    Report,
    Settings,
    measure_cell,
    policy_layer,
    render_text,
    run_cells,
)

LAYER = Layer("dense", "o_proj", 256, 512)


class FakeClock:
    """Each call returns the kernel's cost (seconds); a sample is the mean cost over the rotation."""

    def __init__(self, replicas: int = 1) -> None:
        self.synced = 0
        self.want = replicas
        self.modes: list[str] = []

    def sync(self) -> None:
        self.synced += 1

    def replicas(self, footprint: int) -> int:
        return self.want

    def samples(self, calls: Sequence[Callable[[], object]], *, warmup: int, reps: int, mode: str) -> list[float]:
        self.modes.append(mode)
        for _ in range(warmup):
            for fn in calls:
                fn()
        return [sum(float(fn()) for fn in calls) / len(calls) for _ in range(reps)]  # type: ignore[arg-type]


@dataclass
class Fake:
    """A fake kernel: *cost* seconds per call at M=1 (x M), an output of 4 elements."""

    backend: str
    cost: float
    path: str = "dense"
    error_value: float = 1e-3  #: relative error when it writes everything
    raises_at: frozenset[int] = frozenset()
    writes: int = 4  #: elements written of 4 (fewer: a partial result)
    raise_when_timed: bool = False
    calls: list[int] = field(default_factory=list)

    def unavailable(self) -> str | None:
        return None

    def prepare(self, cell: Cell) -> Prepared:
        if cell.m in self.raises_at:
            raise RuntimeError("CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmulAlgoGetHeuristic`")
        out = [math.nan] * 4

        def run() -> float:
            self.calls.append(cell.m)
            if self.raise_when_timed and len(self.calls) > 1:
                raise RuntimeError("an illegal memory access was encountered")
            for i in range(self.writes):
                out[i] = 1.0
            return self.cost * cell.m

        def poison() -> None:
            out[:] = [math.nan] * 4

        def error() -> float:
            return math.nan if any(math.isnan(x) for x in out) else self.error_value

        return Prepared(run=run, poison=poison, error=error, tolerance=2e-2, how="fake")


def _cands(*names: str, rejected: tuple[str, ...] = ()) -> list[Candidate]:
    out = [
        Candidate(n, "dense", True, f"catalog.dense.{n}", f"rules/backends/dense.yaml:{i}") for i, n in enumerate(names)
    ]
    out += [Candidate(n, "dense", False, f"no-{n}", "rules/known/x.yaml:1", "shipped", "crash") for n in rejected]
    return out


def test_wrong_raising_partial_and_slow_kernels_are_caught_and_ranked() -> None:
    kernels = {
        "fast": Fake("fast", 1e-6),
        "slow": Fake("slow", 3e-6),
        "wrong": Fake("wrong", 0.5e-6, error_value=0.3),  # fastest of all, and wrong
        "raises": Fake("raises", 0.2e-6, raises_at=frozenset({1})),
        "partial": Fake("partial", 0.1e-6, writes=3),  # leaves one element unwritten
    }
    out = measure_cell(Cell("m", LAYER, 1), list(kernels.values()), FakeClock(), Settings(warmup=1, reps=3, passes=2))
    assert out["fast"].status == "ok" and out["fast"].seconds == pytest.approx(1e-6)
    assert out["slow"].status == "ok" and out["slow"].seconds == pytest.approx(3e-6)
    assert out["wrong"].status == "wrong" and out["wrong"].seconds is None and "3.00e-01" in out["wrong"].detail
    assert out["partial"].status == "wrong" and "not finite" in out["partial"].detail
    assert out["raises"].status == "raised" and "CUBLAS_STATUS_NOT_SUPPORTED" in out["raises"].detail
    assert out["fast"].spread == 0.0 and len(out["fast"].passes) == 2
    assert list(out) == list(kernels)  # the candidates' order is kept


def test_a_kernel_that_raises_while_timed_is_a_failure_not_a_time() -> None:
    out = measure_cell(Cell("m", LAYER, 4), [Fake("flaky", 1e-6, raise_when_timed=True)], FakeClock())
    assert out["flaky"].status == "raised" and out["flaky"].detail.endswith("(while timed, graph)")


def test_not_runnable_and_unavailable_are_not_failures() -> None:
    class Missing(Fake):
        def unavailable(self) -> str | None:
            return "no library"

    class Partly(Fake):
        def prepare(self, cell: Cell) -> Prepared:
            raise NotRunnable("needs FlashInfer below M = 32")

    out = measure_cell(Cell("m", LAYER, 1), [Missing("a", 1.0), Partly("b", 1.0)], FakeClock())
    assert [o.status for o in out.values()] == ["not_run", "not_run"]
    assert out["a"].detail == "no library" and "FlashInfer" in out["b"].detail


def _report(kernels: dict[str, Fake], cands: list[Candidate], choice: str, ms: tuple[int, ...] = (1, 16)) -> Report:
    cells = run_cells(
        "org/model",
        [LAYER],
        ms,
        {"dense": cands},
        {"dense": choice},
        lambda path, backend: kernels.get(backend),
        FakeClock(),
        settings=Settings(warmup=0, reps=2, passes=1),
    )
    facts = {"gpu.sm": "sm90", "quant.scheme": "fp8_block", "model.type": "qwen3", "deploy.tp": 1}
    context = {"machine": "fake GPU", "date": "2026-12-04", "versions": {"torch": "2.11.0"}, "facts": facts}
    return Report("org/model", context, {"dense": cands}, cells)


def test_the_choice_loss_and_the_rule_behind_each_failure() -> None:
    kernels = {
        "chosen": Fake("chosen", 2e-6),
        "faster": Fake("faster", 1e-6),
        "decode_crash": Fake("decode_crash", 0.5e-6, raises_at=frozenset({1})),
        "ruled_out": Fake("ruled_out", 0.1e-6),
    }
    cands = _cands("chosen", "faster", "decode_crash", rejected=("ruled_out",))
    report = _report(kernels, cands, "chosen")
    m1, m16 = report.cells
    # at M=1 the crashing candidate is no option; the fastest valid one is `faster`
    assert m1.best is not None and m1.best.backend == "faster"
    assert m1.loss == pytest.approx(1.0)
    # at M=16 it runs and is the fastest valid; the ruled-out one is faster still but not an option
    assert m16.best is not None and m16.best.backend == "decode_crash"
    assert m16.best_any is not None and m16.best_any.backend == "ruled_out"
    assert m16.loss == pytest.approx(3.0)
    (failure,) = report.failures()
    assert failure.outcome.backend == "decode_crash" and failure.cell.m == 1
    assert failure.contradicts_shipped
    assert "valid by catalog.dense.decode_crash (rules/backends/dense.yaml:2)" in failure.line()
    text = render_text(report)
    assert "x dense decode_crash raised" in text and "CONTRADICTS A SHIPPED RULE" in text
    assert "on o_proj@M=1" in text and "+100.0%" in text


def test_a_failed_choice_has_infinite_loss_and_json_says_so() -> None:
    kernels = {"chosen": Fake("chosen", 1e-6, error_value=0.5), "other": Fake("other", 2e-6)}
    report = _report(kernels, _cands("chosen", "other"), "chosen", ms=(8,))
    assert report.cells[0].loss == math.inf
    cell = report.to_json()["cells"][0]
    assert cell["choice_failed"] is True and cell["loss"] is None and cell["fastest"] == "other"


def test_round_trip_through_json() -> None:
    kernels = {"a": Fake("a", 1e-6), "b": Fake("b", 2e-6, raises_at=frozenset({1}))}
    report = _report(kernels, _cands("a", "b"), "a")
    again = Report.from_json(report.to_json())
    assert render_text(again) == render_text(report)
    assert again.to_json()["failures"] == report.to_json()["failures"]
    with pytest.raises(ValueError, match="kernelpolicy.bench/1"):
        Report.from_json({"schema": "kernelpolicy.decision/1"})


def test_emitted_policy_denies_failures_and_prefers_the_measured_order() -> None:
    kernels = {
        "chosen": Fake("chosen", 2e-6),
        "faster": Fake("faster", 1e-6),
        "crashes": Fake("crashes", 1e-6, raises_at=frozenset({1})),
        "wrong": Fake("wrong", 1e-6, error_value=0.1),
    }
    report = _report(kernels, _cands("chosen", "faster", "crashes", "wrong"), "chosen")
    rules = {r["id"]: r for r in policy_layer(report)["rules"]}
    deny = rules["bench-sm90-crashes-dense-raised"]
    assert deny["deny"] == "crashes" and deny["severity"] == "crash" and deny["paths"] == ["dense"]
    assert deny["when"] == {"gpu.sm": "sm90", "quant.scheme": "fp8_block", "model.type": "qwen3"}
    assert "contradicts shipped catalog.dense.crashes" in deny["because"]
    assert any("fake GPU, 2026-12-04" in r for r in deny["refs"]) and "torch 2.11.0" in deny["refs"]
    assert rules["bench-sm90-wrong-dense-wrong"]["severity"] == "accuracy"
    # one process: no order is preferred, however large the gap (the noise across processes is unknown)
    assert not [r for r in rules.values() if "prefer" in r]
