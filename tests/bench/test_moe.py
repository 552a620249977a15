"""bench's MoE path on the CPU: the routed tokens, the kernels' layouts, vLLM's Triton launch
configuration, and fake MoE kernels caught and ranked against the whole expert computation."""

from __future__ import annotations

import math

import pytest

from kernelpolicy.bench import Candidate, Cell, Layer, Prepared, Report, Settings, measure_cell, render_text, run_cells
from kernelpolicy.bench.moe import default_triton_config, grouped, nearest_config, route, routed_here, swap_ab

from .test_protocol import FakeClock

# Qwen3-30B-A3B-FP8 at TP 1: 128 experts, w13 2 x 768 x 2048, top-8
QWEN_MOE = Layer("moe", "experts", 1536, 2048, experts=128, note="128 of 128", topk=8, total_experts=128)


def test_route_draws_distinct_experts_per_token_reproducibly() -> None:
    ids = route(64, 8, 128, seed=7)
    assert len(ids) == 64 and all(len(set(row)) == 8 and all(0 <= e < 128 for e in row) for row in ids)
    assert ids == route(64, 8, 128, seed=7) and ids != route(64, 8, 128, seed=8)
    with pytest.raises(ValueError, match="top-k 9 of 8"):
        route(1, 9, 8)


def test_contiguous_layout_pads_each_expert_to_the_alignment_and_drops_other_ranks() -> None:
    # 3 tokens, top-2, the rank holds experts 0 and 1 of 4
    lay = grouped([[1, 0], [1, 3], [2, 1]], local_experts=2, align=4, keep_remote=False)
    # expert 0: pair 1; expert 1: pairs 0, 2, 5; each padded to 4 rows
    assert lay.pairs == (1, -1, -1, -1, 0, 2, 5, -1)
    assert lay.expert_of_row == (0, -1, -1, -1, 1, 1, 1, -1)
    assert lay.block_experts == (0, 1)
    assert lay.row_of_pair == (4, 0, 5, -1, -1, 6)  # pairs 3 (expert 3) and 4 (expert 2): another rank's
    for pair, row in enumerate(lay.row_of_pair):
        assert row == -1 or lay.pairs[row] == pair


def test_triton_layout_keeps_other_ranks_pairs_in_blocks_of_expert_minus_one() -> None:
    lay = grouped([[1, 0], [1, 3], [2, 1]], local_experts=2, align=2, keep_remote=True)
    assert lay.pairs == (1, -1, 0, 2, 5, -1, 3, 4)
    assert lay.block_experts == (0, 1, 1, -1)  # vLLM's kernel writes zeros for the last block
    assert all(r >= 0 for r in lay.row_of_pair) and lay.rows == 8


def test_every_routed_pair_is_computed_once_on_a_full_rank() -> None:
    ids = route(333, 8, 128, seed=1)
    lay = grouped(ids, 128, 128, keep_remote=False)
    assert sorted(p for p in lay.pairs if p >= 0) == list(range(333 * 8))
    assert lay.rows % 128 == 0 and all(e >= 0 for e, p in zip(lay.expert_of_row, lay.pairs, strict=True) if p >= 0)


def test_triton_launch_configuration_follows_vllm() -> None:
    tuned = {1: {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64}, 64: {"BLOCK_SIZE_M": 32}, 1024: {"BLOCK_SIZE_M": 64}}
    assert nearest_config(tuned, 16)["BLOCK_SIZE_M"] == 16  # 16 is nearer 1 than 64
    assert nearest_config(tuned, 48)["BLOCK_SIZE_M"] == 32 and nearest_config(tuned, 4096)["BLOCK_SIZE_M"] == 64
    small, large = default_triton_config(1), default_triton_config(4096)
    assert (small["BLOCK_SIZE_M"], small["BLOCK_SIZE_N"], small["num_stages"]) == (16, 64, 4)
    assert (large["BLOCK_SIZE_M"], large["BLOCK_SIZE_N"], large["GROUP_SIZE_M"]) == (64, 128, 32)
    assert swap_ab(small, 90) and not swap_ab(small, 100) and not swap_ab(large, 90)


class FakeMoe:
    """A fake fused-MoE kernel computing ``sum_j w_j * x * s_e`` per token from a routing: it can
    drop one expert slot, ignore the routing weights or leave the last token unwritten."""

    def __init__(self, backend: str, cost: float, fault: str = "") -> None:
        self.backend, self.path, self.cost, self.fault = backend, "moe", cost, fault

    def unavailable(self) -> str | None:
        return None

    def prepare(self, cell: Cell) -> Prepared:
        layer = cell.layer
        ids = route(cell.m, layer.topk, layer.total_experts, seed=3)
        w = [[1.0 / layer.topk] * layer.topk for _ in range(cell.m)]  # a balanced router
        x = [1.0 + t for t in range(cell.m)]

        def expert(t: int, slot: int) -> float:
            return x[t] * (1.0 + ids[t][slot] / layer.total_experts)

        ref = [sum(w[t][j] * expert(t, j) for j in range(layer.topk)) for t in range(cell.m)]
        out = [math.nan] * cell.m

        def run() -> float:
            for t in range(cell.m - (self.fault == "partial")):
                slots = range(layer.topk - (self.fault == "drop"))
                out[t] = sum((1.0 if self.fault == "unweighted" else w[t][j]) * expert(t, j) for j in slots)
            return self.cost * cell.m

        def poison() -> None:
            out[:] = [math.nan] * cell.m

        def error() -> float:
            if any(math.isnan(v) for v in out):
                return math.nan
            return math.sqrt(sum((o - r) ** 2 for o, r in zip(out, ref, strict=True)) / sum(r * r for r in ref))

        return Prepared(run=run, poison=poison, error=error, tolerance=5e-2, how="fake MoE")


def test_fake_moe_kernels_wrong_partial_and_slow_are_caught_and_ranked() -> None:
    kernels = [
        FakeMoe("triton", 2e-6),
        FakeMoe("deep_gemm", 3e-6),
        FakeMoe("dropped_slot", 1e-6, "drop"),
        FakeMoe("unweighted", 1e-6, "unweighted"),
        FakeMoe("partial", 1e-6, "partial"),
    ]
    out = measure_cell(Cell("m", QWEN_MOE, 16), kernels, FakeClock(), Settings(warmup=0, reps=2, passes=1))
    assert out["triton"].ok and out["deep_gemm"].ok and out["triton"].error == 0.0
    assert out["dropped_slot"].status == "wrong" and (out["dropped_slot"].error or 0) > 5e-2
    assert out["unweighted"].status == "wrong" and (out["unweighted"].error or 0) > 1
    assert out["partial"].status == "wrong" and "not finite" in out["partial"].detail


def test_moe_report_ranks_the_choice_and_keeps_the_routing_through_json() -> None:
    cands = [
        Candidate("triton", "moe", True, "catalog.moe.triton", "rules/backends/moe.yaml:67"),
        Candidate("deep_gemm", "moe", True, "catalog.moe.deep_gemm", "rules/backends/moe.yaml:32"),
    ]
    kernels = {"triton": FakeMoe("triton", 2e-6), "deep_gemm": FakeMoe("deep_gemm", 1e-6)}
    cells = run_cells(
        "Qwen/Qwen3-30B-A3B-FP8",
        [QWEN_MOE],
        (1, 128),
        {"moe": cands},
        {"moe": "triton"},
        lambda path, backend: kernels.get(backend),
        FakeClock(),
        settings=Settings(warmup=0, reps=2, passes=1),
    )
    report = Report("Qwen/Qwen3-30B-A3B-FP8", {"machine": "fake GPU", "date": "2026-12-04"}, {"moe": cands}, cells)
    assert [c.best.backend for c in report.cells if c.best] == ["deep_gemm", "deep_gemm"]
    assert report.cells[0].loss == pytest.approx(1.0)
    text = render_text(report)
    assert "experts (128x1536x2048 + 128x2048x768, top-8)" in text
    data = report.to_json()
    assert data["cells"][0]["topk"] == 8 and data["cells"][0]["total_experts"] == 128
    assert render_text(Report.from_json(data)) == text  # the routing survives the replay (`--report`)


def test_a_rank_no_token_lands_on_is_not_measured() -> None:
    # EP 8 of Qwen3-30B-A3B at M = 1: the rank holds experts 0-15 of 128; a token routed elsewhere
    # gives a zero reference (a relative error of 0/0), so the runners report the cell as not run
    assert not routed_here([[16, 40, 77, 90, 100, 101, 120, 127]], 16)
    assert routed_here([[16, 40, 77, 90, 100, 101, 120, 15]], 16)
    assert not grouped([[16, 40]], 16, 128, keep_remote=False).rows  # DeepGEMM would get no rows
