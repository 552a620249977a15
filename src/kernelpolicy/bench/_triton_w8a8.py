"""A block-FP8 W8A8 GEMM in Triton, written after the design of vLLM's ``w8a8_triton_block_scaled_mm``
(grouped tile order, FP32 accumulator, each K step rescaled by the activation group's scale per
row and the weight block's scale per column block), for machines where vLLM itself cannot be
imported. Configs: vLLM's tuned JSON for the shape when ``$KERNELPOLICY_BENCH_TRITON_CONFIGS``
names a folder holding one, else vLLM's default.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = ["block_fp8_mm"]

_DEFAULT = {
    "BLOCK_SIZE_M": 64,
    "BLOCK_SIZE_N": 128,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 32,
    "num_warps": 4,
    "num_stages": 2,
}
_CONFIGS: dict[tuple[int, int], dict[int, dict[str, int]] | None] = {}


@triton.jit  # type: ignore[untyped-decorator]
def _kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913 (a kernel's arguments)
    a_ptr,
    b_ptr,
    c_ptr,
    as_ptr,
    bs_ptr,
    M,
    N,
    K,
    group_n,
    group_k,
    s_am,
    s_ak,
    s_bk,
    s_bn,
    s_cm,
    s_cn,
    s_asm,
    s_ask,
    s_bsk,
    s_bsn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows = min(tiles_m - first_m, GROUP_SIZE_M)
    tile_m = first_m + (pid % rows)
    tile_n = (pid % per_group) // rows
    rm = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    rn = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    rk = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn
    as_ptrs = as_ptr + rm * s_asm
    bs_ptrs = bs_ptr + (rn // group_n) * s_bsn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(tl.cdiv(K, BLOCK_SIZE_K)):
        left = K - step * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
        g = (step * BLOCK_SIZE_K) // group_k
        acc += tl.dot(a, b) * tl.load(as_ptrs + g * s_ask)[:, None] * tl.load(bs_ptrs + g * s_bsk)[None, :]
        a_ptrs += BLOCK_SIZE_K * s_ak
        b_ptrs += BLOCK_SIZE_K * s_bk
    cm = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cn = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    tl.store(
        c_ptr + s_cm * cm[:, None] + s_cn * cn[None, :],
        acc.to(c_ptr.dtype.element_ty),
        mask=(cm[:, None] < M) & (cn[None, :] < N),
    )


def _config(n: int, k: int, m: int) -> dict[str, int]:
    if (n, k) not in _CONFIGS:
        folder = os.environ.get("KERNELPOLICY_BENCH_TRITON_CONFIGS", "")
        device = torch.cuda.get_device_name().replace(" ", "_")
        name = f"N={n},K={k},device_name={device},dtype=fp8_w8a8,block_shape=[128,128].json"
        path = os.path.join(folder, name)
        table = None
        if folder and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                table = {int(key): value for key, value in json.load(f).items()}
        _CONFIGS[(n, k)] = table
    table = _CONFIGS[(n, k)]
    if not table:
        return _DEFAULT
    return table[min(table, key=lambda x: abs(x - m))]


def block_fp8_mm(a: Any, b: Any, a_s: Any, b_s: Any, block_size: list[int], output_dtype: Any = None) -> Any:
    """``a @ b.T`` for FP8 *a* (M, K) with (M, K/128) scales and FP8 *b* (N, K) with 128x128 block scales."""
    m, k = a.shape
    n = b.shape[0]
    out = torch.empty((m, n), dtype=output_dtype or torch.bfloat16, device=a.device)
    cfg = _config(n, k, m)
    grid = (triton.cdiv(m, cfg["BLOCK_SIZE_M"]) * triton.cdiv(n, cfg["BLOCK_SIZE_N"]),)
    _kernel[grid](
        a, b, out, a_s, b_s, m, n, k, block_size[0], block_size[1],
        a.stride(0), a.stride(1), b.stride(1), b.stride(0), out.stride(0), out.stride(1),
        a_s.stride(0), a_s.stride(1), b_s.stride(1), b_s.stride(0), **cfg,
    )  # fmt: skip
    return out
