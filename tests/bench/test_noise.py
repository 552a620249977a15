"""bench times calls as the engine runs them and prefers only what beats the noise (CPU, no torch).

Fake kernels on a fake clock: the timing mode per M (CUDA graph up to the engine's largest
capture size, eager above), the rotation over copies of a call's data past the L2, several
processes combined into one measurement, and the emitted preference scoped to the M where it
holds beyond the noise of every pass of every process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kernelpolicy.bench import Candidate, Cell, Layer, Prepared, Report, Settings, measure_cell, render_text, run_cells
from kernelpolicy.bench._torch import MAX_REPLICAS, MIN_UNIT_CALLS, replicas_for, unit_calls
from kernelpolicy.bench.combine import combine, path_verdicts, preferences
from kernelpolicy.bench.emit import policy_layer, render_policy
from kernelpolicy.bench.protocol import timing_mode
from kernelpolicy.cli import main

LAYERS = (Layer("dense", "qkv_proj", 5120, 2048), Layer("dense", "o_proj", 2048, 4096))


class Clock:
    """A sample is the rotation's mean cost times the next jitter factor (cycled)."""

    def __init__(self, jitter: Sequence[float] = (1.0,), replicas: int = 1) -> None:
        self.jitter, self.i, self.want = list(jitter), 0, replicas
        self.modes: list[tuple[int, str]] = []

    def sync(self) -> None:
        pass

    def replicas(self, footprint: int) -> int:
        return self.want

    def samples(self, calls: Sequence[Callable[[], object]], *, warmup: int, reps: int, mode: str) -> list[float]:
        self.modes.append((len(calls), mode))
        out = []
        for _ in range(reps):
            f = self.jitter[self.i % len(self.jitter)]
            self.i += 1
            out.append(f * sum(float(fn()) for fn in calls) / len(calls))  # type: ignore[arg-type]
        return out


@dataclass
class Kernel:
    """Costs *us[m]* microseconds (times *scale*: a process slow across the board)."""

    backend: str
    us: dict[int, float]
    scale: float = 1.0
    path: str = "dense"
    copies: list[int] = field(default_factory=list)

    def unavailable(self) -> str | None:
        return None

    def prepare(self, cell: Cell) -> Prepared:
        out = [math.nan]
        cost = self.us[cell.m] * 1e-6 * self.scale

        def run() -> float:
            out[0] = 1.0
            return cost

        def copy() -> Callable[[], object]:
            self.copies.append(cell.m)
            return run

        return Prepared(
            run=run,
            poison=lambda: out.__setitem__(0, math.nan),
            error=lambda: 1e-3 if out[0] == 1.0 else math.nan,
            tolerance=2e-2,
            replicate=copy,
            footprint=1 << 20,
        )


CANDS = [
    Candidate("chosen", "dense", True, "catalog.dense.chosen", "rules/backends/dense.yaml:1"),
    Candidate("rival", "dense", True, "catalog.dense.rival", "rules/backends/dense.yaml:2"),
]
FACTS = {"gpu.sm": "sm90", "quant.scheme": "fp8_block", "model.type": "qwen3_moe", "deploy.tp": 1}


def _run(kernels: dict[str, Kernel], ms: Sequence[int], jitter: Sequence[float] = (1.0,)) -> Report:
    cells = run_cells(
        "Qwen/Qwen3-30B-A3B-FP8",
        LAYERS,
        ms,
        {"dense": CANDS},
        {"dense": "chosen"},
        lambda path, backend: kernels.get(backend),
        Clock(jitter),
        settings=Settings(warmup=0, reps=3, passes=3),
    )
    context = {
        "machine": "fake H200",
        "date": "2026-12-05 10:00 UTC",
        "versions": {"torch": "2.11.0"},
        "protocol": {"passes": 3, "reps": 3, "warmup": 0, "processes": 1, "mode": "engine", "graph_max_m": 512},
        "facts": FACTS,
        "fingerprint": "abc",
    }
    return Report("Qwen/Qwen3-30B-A3B-FP8", context, {"dense": CANDS}, cells)


def test_the_engine_mode_times_captured_sizes_as_graph_replays_and_larger_m_eager() -> None:
    settings = Settings()
    assert [timing_mode(m, settings) for m in (1, 16, 128, 512, 513, 1024, 4096)] == ["graph"] * 4 + ["eager"] * 3
    assert timing_mode(1, Settings(mode="eager")) == "eager" and timing_mode(4096, Settings(mode="graph")) == "graph"
    clock = Clock(replicas=4)
    kernel = Kernel("chosen", {1: 10.0, 1024: 50.0})
    for m in (1, 1024):
        out = measure_cell(Cell("x", LAYERS[0], m), [kernel], clock, Settings(warmup=0, reps=2, passes=2))
        assert out["chosen"].mode == ("graph" if m == 1 else "eager") and out["chosen"].replicas == 4
        assert out["chosen"].seconds == pytest.approx(kernel.us[m] * 1e-6)
    # the rotation: the call and 3 copies over fresh data, each timed unit runs all four
    assert clock.modes == [(4, "graph"), (4, "graph"), (4, "eager"), (4, "eager")]
    assert kernel.copies == [1, 1, 1, 1024, 1024, 1024]


def test_the_rotation_is_sized_from_the_l2() -> None:
    l2 = 60 * 1024 * 1024
    assert replicas_for(16 * 1024 * 1024, l2) == 12  # kv_b_proj's 16 MiB of FP8: 12 copies are 3x the L2
    assert replicas_for(264 * 1024 * 1024, l2) == 1  # a weight larger than 3x the L2 needs no copy
    assert replicas_for(1024, l2) == MAX_REPLICAS and replicas_for(0, l2) == 1
    assert unit_calls(12) * 12 >= MIN_UNIT_CALLS and unit_calls(1) == MIN_UNIT_CALLS and unit_calls(64) == 1


def _slow_then_quiet() -> list[Report]:
    """The 2026-12-04 kv_b_proj case: one process slow across the board with the choice far behind,
    the other with both close: no loss beyond the noise."""
    a = _run({"chosen": Kernel("chosen", {128: 31.0}), "rival": Kernel("rival", {128: 17.7})}, (128,))
    b = _run({"chosen": Kernel("chosen", {128: 17.0}), "rival": Kernel("rival", {128: 18.3})}, (128,))
    return [a, b]


def test_two_processes_combine_and_a_loss_inside_their_noise_is_not_a_loss() -> None:
    one, two = _slow_then_quiet()
    assert one.cells[0].beyond_noise is True  # one process alone would call it a loss
    both = combine([one, two])
    cell = both.cells[0]
    chosen = cell.outcomes["chosen"]
    assert chosen.processes == 2 and len(chosen.passes) == 6  # 3 passes in each of 2 processes
    assert cell.beyond_noise is False
    assert both.context["protocol"]["processes"] == 2
    text = render_text(both)
    assert "~" in text and "in each of 2 processes" in text
    again = Report.from_json(json.loads(json.dumps(both.to_json())))
    assert render_text(again) == text and again.cells[0].outcomes["chosen"].passes == chosen.passes


def test_a_failure_in_one_process_is_a_failure_and_reports_must_match() -> None:
    good = _run({"chosen": Kernel("chosen", {1: 10.0}), "rival": Kernel("rival", {1: 9.0})}, (1,))
    bad_kernel = Kernel("rival", {1: 9.0})
    bad_kernel.prepare = lambda cell: (_ for _ in ()).throw(RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED"))  # type: ignore[method-assign]
    bad = _run({"chosen": Kernel("chosen", {1: 10.0}), "rival": bad_kernel}, (1,))
    merged = combine([good, bad]).cells[0].outcomes["rival"]
    assert merged.status == "raised" and merged.detail.endswith("(in 1 of 2 processes)")
    other = Report("org/other", good.context, good.candidates, good.cells)
    with pytest.raises(ValueError, match="different models"):
        combine([good, other])


def _decode_win() -> list[Report]:
    """rival beats the choice beyond the noise at M = 1 and 16, ties at 128, loses at 1024."""
    us_c = {1: 20.0, 16: 21.0, 128: 30.0, 1024: 100.0}
    us_r = {1: 15.0, 16: 16.0, 128: 30.2, 1024: 130.0}
    return [
        _run({"chosen": Kernel("chosen", us_c, s), "rival": Kernel("rival", us_r, s)}, (1, 16, 128, 1024), j)
        for s, j in ((1.0, (1.0, 1.01)), (1.02, (0.99, 1.0)))
    ]


def test_a_preference_holds_only_on_the_m_window_where_it_beats_the_noise() -> None:
    report = combine(_decode_win())
    verdicts = [(v.m, v.verdict) for v in path_verdicts(report, "dense", "rival", 0.03)]
    assert verdicts == [(1, "faster"), (16, "faster"), (128, "tie"), (1024, "slower")]
    (pref,) = preferences(report, 0.03)
    assert (pref.backend, pref.up_to, pref.faster_at) == ("rival", 16, [1, 16])
    (rule,) = [r for r in policy_layer(report)["rules"] if "prefer" in r]
    assert rule["prefer"] == ["rival", "chosen"] and rule["when"]["deploy.max_num_batched_tokens"] == "<= 16"
    assert rule["id"] == "bench-sm90-qwen3_moe-dense-rival-upto-16" and "2 processes" in rule["because"]
    # one process of the same runs: nothing preferred, and the emitted layer says why
    single = _decode_win()[0]
    assert preferences(single, 0.03) == [] and "no order is preferred" in render_policy(single)


def test_no_preference_when_the_window_does_not_start_at_m_1_or_the_gain_is_under_the_threshold() -> None:
    late = combine(
        [
            _run({"chosen": Kernel("chosen", {16: 20.0}), "rival": Kernel("rival", {16: 10.0})}, (16,)),
            _run({"chosen": Kernel("chosen", {16: 20.0}), "rival": Kernel("rival", {16: 10.0})}, (16,)),
        ]
    )
    assert preferences(late, 0.03) == []  # M = 1 was not measured: a deployment's decode is unknown
    close = combine(
        [_run({"chosen": Kernel("chosen", {1: 10.2}), "rival": Kernel("rival", {1: 10.0})}, (1,)) for _ in range(2)]
    )
    assert path_verdicts(close, "dense", "rival", 0.03)[0].verdict == "tie" and preferences(close, 0.03) == []


def test_the_cli_combines_runs_and_the_emitted_preference_is_proved_and_scoped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("yaml")
    runs = []
    for i, r in enumerate(_decode_win()):
        data = r.to_json()
        data["candidates"] = {
            "dense": [
                {"backend": "flashinfer_deep_gemm", "valid": True, "rule": "catalog.dense.flashinfer_deep_gemm"},
                {"backend": "cutlass", "valid": True, "rule": "catalog.dense.cutlass"},
            ]
        }
        for cell in data["cells"]:
            cell["choice"] = "flashinfer_deep_gemm"
            for o in cell["outcomes"]:
                o["backend"] = {"chosen": "flashinfer_deep_gemm", "rival": "cutlass"}[o["backend"]]
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps(data))
        runs.append(str(path))
    policy = tmp_path / "measured.yaml"
    assert main(["bench", "--report", runs[0], "--report", runs[1], "--emit-policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "in each of 2 processes" in out and "beyond the noise the choice loses in" in out
    assert "deploy.max_num_batched_tokens: <= 16" in policy.read_text()
    assert main(["check", "--no-coverage", str(policy)]) == 0
    capsys.readouterr()
    base = ["explain", "--gpu", "H200", "--model", "Qwen/Qwen3-30B-A3B-FP8", "--policy", str(policy), "--json"]
    for tokens, expect in (("16", "cutlass"), ("8192", "flashinfer_deep_gemm")):
        assert main([*base, "--fact", f"deploy.max_num_batched_tokens={tokens}"]) == 0
        assert json.loads(capsys.readouterr().out)["paths"]["dense"]["backend"] == expect
    # reports of different models are refused in one line
    other = json.loads(Path(runs[1]).read_text())
    other["model"] = "Qwen/Qwen3-32B-FP8"
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert main(["bench", "--report", runs[0], "--report", str(tmp_path / "other.json")]) == 2
    err = capsys.readouterr().err
    assert "--report: reports of different models" in err and err.count("\n") == 1
