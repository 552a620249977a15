"""The routed tokens of one MoE cell and how the fused-MoE kernels lay them out (pure).

A cell of the ``moe`` path is the whole expert computation of one rank for *m* tokens: each token
goes to ``topk`` distinct experts of all ranks (drawn from a seeded generator, uniformly, as a
balanced router would), the rank computes the pairs that land on its experts (the first
``experts`` of ``total_experts``). The kernels read those pairs grouped by expert, each expert's
group padded to the kernel's block of rows: DeepGEMM's contiguous layout (padding rows marked
with expert -1, pairs of other ranks left out) and vLLM's Triton ``fused_moe`` (sorted pair ids,
one expert id per block, other ranks' pairs in blocks of expert -1, which the kernel fills with
zeros). Triton's launch configuration follows vLLM's: a tuned file for the GPU when one exists
(the entry of the nearest M), else its default for block FP8.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Grouped", "default_triton_config", "grouped", "nearest_config", "route", "routed_here", "swap_ab"]


def route(m: int, topk: int, total_experts: int, seed: int = 0) -> list[list[int]]:
    """*topk* distinct experts of *total_experts* for each of *m* tokens (seeded, uniform)."""
    if not 0 < topk <= total_experts:
        raise ValueError(f"top-k {topk} of {total_experts} experts")
    rng = random.Random(seed * 1_000_003 + m)
    return [rng.sample(range(total_experts), topk) for _ in range(m)]


def routed_here(topk_ids: Sequence[Sequence[int]], local_experts: int) -> bool:
    """Whether any token lands on the rank's experts; when none does the cell's reference is 0 and
    a relative error means nothing (under EP at small M), so the runners do not run it."""
    return any(0 <= e < local_experts for ids in topk_ids for e in ids)


@dataclass(frozen=True)
class Grouped:
    """Pairs (token * topk + slot) grouped by expert in blocks of *align* rows.

    ``pairs[i]``: the pair in row *i* (``-1``: padding); ``expert_of_row[i]``: its expert
    (``-1``: padding or another rank's); ``block_experts``: one expert per block of *align* rows;
    ``row_of_pair[p]``: the row of pair *p* (``-1``: not computed on this rank).
    """

    align: int
    pairs: tuple[int, ...]
    expert_of_row: tuple[int, ...]
    block_experts: tuple[int, ...]
    row_of_pair: tuple[int, ...]

    @property
    def rows(self) -> int:
        return len(self.pairs)


def grouped(topk_ids: Sequence[Sequence[int]], local_experts: int, align: int, *, keep_remote: bool) -> Grouped:
    """The layout of *topk_ids* for a rank holding experts ``0 .. local_experts - 1``; with
    *keep_remote* the other ranks' pairs follow in blocks of expert -1 (vLLM's Triton kernel
    writes zeros for them), else they are left out (DeepGEMM's contiguous layout)."""
    by_expert: dict[int, list[int]] = {}
    remote: list[int] = []
    flat = [e for ids in topk_ids for e in ids]
    for pair, e in enumerate(flat):
        if 0 <= e < local_experts:
            by_expert.setdefault(e, []).append(pair)
        else:
            remote.append(pair)
    pairs: list[int] = []
    experts: list[int] = []
    groups = [(e, by_expert[e]) for e in sorted(by_expert)] + ([(-1, remote)] if keep_remote and remote else [])
    for e, ps in groups:
        padded = -(-len(ps) // align) * align
        pairs += ps + [-1] * (padded - len(ps))
        experts += [e if e >= 0 else -1] * len(ps) + [-1] * (padded - len(ps))
    row_of_pair = [-1] * len(flat)
    for row, p in enumerate(pairs):
        if p >= 0:
            row_of_pair[p] = row
    blocks = tuple(experts[i] if pairs[i] >= 0 else -1 for i in range(0, len(pairs), align))
    return Grouped(align, tuple(pairs), tuple(experts), blocks, tuple(row_of_pair))


def nearest_config(configs: Mapping[int, Mapping[str, int]], m: int) -> dict[str, int]:
    """The entry of a tuned file for *m* tokens: the one with the nearest M (vLLM's rule)."""
    return dict(configs[min(configs, key=lambda x: abs(x - m))])


def default_triton_config(m: int, block: Sequence[int] = (128, 128)) -> dict[str, int]:
    """vLLM's default launch configuration of its block-FP8 ``fused_moe`` kernel on CUDA."""
    small = m <= 8 and block[0] % 64 == 0
    return {
        "BLOCK_SIZE_M": 16 if m <= 64 else 64,
        "BLOCK_SIZE_N": 64 if small else block[0],
        "BLOCK_SIZE_K": block[1],
        "GROUP_SIZE_M": 1 if m <= 16 else 32,
        "num_warps": 4,
        "num_stages": (4 if m <= 4 else 3) if small else 3,
    }


def swap_ab(config: Mapping[str, int], sm: int) -> bool:
    """Whether vLLM's FP8 ``fused_moe`` launch swaps A and B (Hopper, thin M blocks)."""
    return sm == 90 and config["BLOCK_SIZE_M"] < 64 and config["BLOCK_SIZE_N"] >= 64
