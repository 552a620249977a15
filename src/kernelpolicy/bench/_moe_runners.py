"""MoE runners: the whole expert computation of one rank, run the way vLLM runs it.

A cell is *m* BF16 tokens routed to ``topk`` experts (:mod:`.moe`), block-FP8 expert weights
(w13: 2I x H, w2: H x I, 128x128 blocks, FP32 scales) and router weights; the float64 reference is
the same computation on the dequantised operands, with both activations group-quantised as the
kernels see them: ``sum_j w_j * q(silu(g) * u) @ W2_e.T`` where ``g, u = q(a) @ W13_e.T`` (the
first product and the activation rounded to BF16, as the kernels pass them on).
Timed as one unit: the activation quantisation (vLLM's op), the permutation, both grouped GEMMs,
the SiLU-and-multiply and its quantisation, and the weighted sum over the top-k. The routing
itself (top-k of the logits) and the layout's indices are made once per cell, outside the time.
A cell where no token lands on the rank's experts (EP, small M) is not run: its reference is 0.
The ``deep_gemm`` runner's gather and weighted sum are plain torch ops over every (token, slot)
pair (vLLM fuses them into one Triton kernel over the rank's rows): at large M they cost it more
than vLLM pays (DeepSeek-V3, M = 4096: about 0.5 GB more memory traffic).

============  =====================================================================================
``deep_gemm`` vLLM's ``DeepGemmExperts`` (contiguous layout, EP 1 or high-throughput EP): quant
              (row scales), rows gathered into DeepGEMM's contiguous layout (groups padded to its
              M alignment), DeepGEMM ``m_grouped_fp8_gemm_nt_contiguous`` with TMA-aligned scales,
              SiLU-and-multiply, quant (TMA-aligned scales), the second grouped GEMM, the sum
``triton``    vLLM's ``fused_experts`` on block FP8: quant (row scales), vLLM's Triton
              ``fused_moe_kernel`` (the kernel's source loaded from vLLM's ``fused_moe.py``: the
              installed vLLM, else the file named in ``$KERNELPOLICY_BENCH_VLLM_FUSED_MOE``) with
              vLLM's tuned H200 configs (``$KERNELPOLICY_BENCH_TRITON_CONFIGS``) or its default,
              SiLU-and-multiply, quant, the second kernel (router weights applied), the sum
``flashinfer_cutlass``  vLLM's ``FlashInferExperts`` on block FP8 (sm90): FlashInfer's
              ``cutlass_fused_moe`` with ``use_deepseek_fp8_block_scale`` (BF16 tokens in, the
              quantisation, both grouped GEMMs and the weighted sum inside), w13 given as w31
              (halves swapped, as vLLM's ``swap_w13_to_w31``), global expert ids with the EP size;
              not yet run on a GPU: FlashInfer 0.6.14 builds its sm90 module (179 translation
              units of TensorRT-LLM's CUTLASS MoE) at the first call, longer than a lent call
============  =====================================================================================

Each runner can copy its call for the clock's rotation past the L2 by routing the same tokens
again with another seed (other experts' weights are read), not by copying the weights.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ._torch import FP8_MAX, GROUP
from .moe import default_triton_config, grouped, nearest_config, route, routed_here, swap_ab
from .protocol import Cell, NotRunnable, Prepared

__all__ = ["MOE_TABLE", "load_fused_moe_kernel"]

#: Relative error above which a MoE output is wrong. Correct kernels sit at 1.6-2.0e-2 on the H200:
#: the first GEMM's own error (~3e-3, accumulation order) moves a few percent of the intermediate
#: activations across an FP8 rounding step when they are quantised again, which no reference can
#: predict; a wrong expert, scale layout, routing weight or a missing row costs 0.3 or more.
MOE_TOLERANCE: Final = 5e-2
#: DeepGEMM's M alignment of the contiguous layout when it does not say (its default on sm90).
DG_ALIGN: Final = 128
#: Experts quantised at once when the weights are made (bounds the float32 scratch).
_CHUNK: Final = 8


@dataclass
class MoeData:
    a: Any  #: (M, H) bf16
    topk_ids: list[list[int]]
    topk_w: Any  #: (M, topk) float32
    w13: Any  #: (E, 2I, H) fp8
    s13: Any  #: (E, 2I/128, H/128) float32
    w2: Any  #: (E, H, I) fp8
    s2: Any  #: (E, H/128, I/128) float32
    ref: Any  #: (M, H) float64


def _quant_blocks(torch: Any, w: Any) -> tuple[Any, Any]:
    """(fp8, scales) of *w* (E, N, K) float32 in 128x128 blocks (N, K multiples of 128)."""
    e, n, k = w.shape
    v = w.view(e, n // GROUP, GROUP, k // GROUP, GROUP)
    s = v.abs().amax(dim=(2, 4)).clamp(min=1e-10) / FP8_MAX
    q = (v / s[:, :, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(e, n, k)
    return q, s.contiguous()


def _dequant(torch: Any, q: Any, s: Any) -> Any:
    return q.double() * s.double().repeat_interleave(GROUP, 0).repeat_interleave(GROUP, 1)


def _weights(env: Any, e: int, n: int, k: int, salt: int) -> tuple[Any, Any]:
    torch = env.torch
    q = torch.empty((e, n, k), dtype=torch.float8_e4m3fn, device="cuda")
    s = torch.empty((e, n // GROUP, k // GROUP), dtype=torch.float32, device="cuda")
    g = torch.Generator(device="cuda")
    g.manual_seed(4321 + salt)
    for i in range(0, e, _CHUNK):
        j = min(e, i + _CHUNK)
        w = torch.randn((j - i, n, k), device="cuda", generator=g) / math.sqrt(k)
        q[i:j], s[i:j] = _quant_blocks(torch, w)
    return q, s


_CACHE: dict[tuple[object, ...], Any] = {}


def moe_data(env: Any, cell: Cell) -> MoeData:
    """The cell's data (weights made once per layer, tokens and reference once per M)."""
    torch = env.torch
    layer = cell.layer
    e, n2, h = layer.experts, layer.n, layer.k
    inter = n2 // 2
    wkey = ("moe-w", e, n2, h)
    if wkey not in _CACHE:
        _CACHE.clear()
        _CACHE[wkey] = (*_weights(env, e, n2, h, 1), *_weights(env, e, h, inter, 2))
    ckey = ("moe-c", e, n2, h, cell.m)
    if ckey not in _CACHE:
        for key in [x for x in _CACHE if x[0] == "moe-c"]:
            del _CACHE[key]
        w13, s13, w2, s2 = _CACHE[wkey]
        g = torch.Generator(device="cuda")
        g.manual_seed(99 + cell.m)
        a = torch.randn((cell.m, h), device="cuda", generator=g).to(torch.bfloat16)
        topk = max(1, layer.topk)
        ids = route(cell.m, topk, max(layer.total_experts, e), seed=7)
        tw = torch.softmax(torch.randn((cell.m, topk), device="cuda", generator=g), dim=1)
        aq = env.lab._group_dequant(a)
        ref = torch.zeros((cell.m, h), dtype=torch.float64, device="cuda")
        flat = torch.tensor(ids, device="cuda").view(-1)
        for ex in sorted({x for row in ids for x in row if x < e}):
            pairs = (flat == ex).nonzero().view(-1)
            tokens = pairs // topk
            # the kernels hand the first product and the activation on in BF16: rounded here too,
            # or the FP8 rounding of the second quantisation flips on ~7% of the elements (~2e-2)
            hid = (aq[tokens] @ _dequant(torch, w13[ex], s13[ex]).t()).to(torch.bfloat16).double()
            act = (torch.nn.functional.silu(hid[:, :inter]) * hid[:, inter:]).to(torch.bfloat16)
            y = env.lab._group_dequant(act) @ _dequant(torch, w2[ex], s2[ex]).t()
            ref.index_add_(0, tokens, y * tw.view(-1)[pairs].double()[:, None])
        _CACHE[ckey] = MoeData(a, ids, tw, w13, s13, w2, s2, ref)
    data: MoeData = _CACHE[ckey]
    return data


def _silu_mul(env: Any) -> tuple[Callable[[Any, Any], None], str]:
    torch = env.torch
    if env.vllm_ops and hasattr(torch.ops._C, "silu_and_mul"):
        op = torch.ops._C.silu_and_mul
        return op, "vLLM silu_and_mul"
    f = torch.nn.functional

    def native(out: Any, x: Any) -> None:
        i = x.shape[1] // 2
        out.copy_(f.silu(x[:, :i]) * x[:, i:])

    return native, "torch SiLU-and-multiply"


class _Poisoned:
    """Buffers a run writes, filled with NaN before the checked run (an unwritten row stays NaN)."""

    def __init__(self, torch: Any, *bufs: Any) -> None:
        self.torch, self.bufs = torch, list(bufs)
        self.last: Any = None

    def poison(self) -> None:
        for b in self.bufs:
            b.fill_(float("nan"))
        self.last = None


def _error(env: Any, box: _Poisoned, ref: Any) -> float:
    from ._torch import rel_error

    return rel_error(env.torch, box.last, ref) if box.last is not None else math.nan


def _rerouted(env: Any, cell: Cell, d: MoeData, salt: int) -> tuple[list[list[int]], Any]:
    """Another routing of the cell's tokens (a copy for the rotation: it touches other experts)."""
    topk = max(1, cell.layer.topk)
    ids = route(cell.m, topk, max(cell.layer.total_experts, cell.layer.experts), seed=1000 + salt)
    return ids, d.topk_w


def _touched(ids: list[list[int]], experts: int, per_expert: int) -> int:
    """Bytes of the experts' weights a routing reads on this rank."""
    return len({e for row in ids for e in row if 0 <= e < experts}) * per_expert


def _replicate(
    env: Any, cell: Cell, d: MoeData, build: Callable[[Any, Any], Callable[[], Any] | None]
) -> Callable[[], Callable[[], Any]]:
    count = [0]

    def copy() -> Callable[[], Any]:
        while True:  # a routing with no token on the rank's experts (EP, small M) is drawn again
            count[0] += 1
            run = build(*_rerouted(env, cell, d, count[0]))
            if run is not None:
                return run

    return copy


def _per_expert(d: MoeData) -> int:
    return sum(int(t[0].numel()) * int(t.element_size()) for t in (d.w13, d.s13, d.w2, d.s2))


def make_deep_gemm(env: Any, cell: Cell) -> Prepared:
    torch, dg = env.torch, env.deep_gemm
    d = moe_data(env, cell)
    e, n2, h = cell.layer.experts, cell.layer.n, cell.layer.k
    inter, topk, m = n2 // 2, max(1, cell.layer.topk), cell.m
    get_align = getattr(dg, "get_mk_alignment_for_contiguous_layout", None)
    said = get_align() if callable(get_align) else DG_ALIGN
    align = int(said[0] if isinstance(said, (list, tuple)) else said)
    if not routed_here(d.topk_ids, e):
        raise NotRunnable(f"no token of {m} is routed to this rank's {e} experts (DeepGEMM is not called)")
    silu, how_act = _silu_mul(env)
    tma = dg.get_mn_major_tma_aligned_tensor
    hows: list[str] = []

    def build(ids: list[list[int]], topk_w: Any) -> Callable[[], Any] | None:
        if not routed_here(ids, e):
            return None
        lay = grouped(ids, e, align, keep_remote=False)
        rows = lay.rows
        tok = torch.tensor([p // topk if p >= 0 else 0 for p in lay.pairs], dtype=torch.long, device="cuda")
        m_idx = torch.tensor(lay.expert_of_row, dtype=torch.int32, device="cuda")
        gather = torch.tensor([r if r >= 0 else rows for r in lay.row_of_pair], dtype=torch.long, device="cuda")
        weights = topk_w.view(-1, 1)
        mm1 = torch.empty((rows, n2), dtype=torch.bfloat16, device="cuda")
        act = torch.empty((rows, inter), dtype=torch.bfloat16, device="cuda")
        mm2x = torch.zeros((rows + 1, h), dtype=torch.bfloat16, device="cuda")  # the last row: other ranks' pairs
        mm2 = mm2x[:rows]
        quant1, q1, s1, how1 = env.quant(d.a, "row")
        quant2, q2, s2, how2 = env.quant(act, "tma")
        hows[:] = [how1, how2]
        box.bufs = [mm1, act, mm2]

        def run() -> Any:
            quant1()
            sa = tma(s1.index_select(0, tok))
            dg.m_grouped_fp8_gemm_nt_contiguous(
                (q1.index_select(0, tok), sa), (d.w13, d.s13), mm1, m_idx, disable_ue8m0_cast=True
            )
            silu(act, mm1)
            quant2()
            dg.m_grouped_fp8_gemm_nt_contiguous((q2, s2), (d.w2, d.s2), mm2, m_idx, disable_ue8m0_cast=True)
            y = (mm2x.index_select(0, gather).float() * weights).view(m, topk, h).sum(dim=1)
            box.last = y.to(torch.bfloat16)
            return box.last

        return run

    box = _Poisoned(torch)
    run = build(d.topk_ids, d.topk_w)
    assert run is not None
    return Prepared(
        run=run,
        poison=box.poison,
        error=lambda: _error(env, box, d.ref),
        tolerance=MOE_TOLERANCE,
        how=(
            f"{hows[0]} + gather into DeepGEMM's contiguous layout (align {align}) + DeepGEMM "
            f"m_grouped_fp8_gemm_nt_contiguous + {how_act} + {hows[1]} + grouped GEMM + weighted sum"
        ),
        replicate=_replicate(env, cell, d, _keeping(box, build)),
        footprint=_touched(d.topk_ids, e, _per_expert(d)),
    )


def _keeping(
    box: _Poisoned, build: Callable[[Any, Any], Callable[[], Any] | None]
) -> Callable[[Any, Any], Callable[[], Any] | None]:
    """*build* for a copy: the checked call's buffers stay the ones poisoned and read back."""

    def copy(ids: Any, topk_w: Any) -> Callable[[], Any] | None:
        bufs, last = box.bufs, box.last
        run = build(ids, topk_w)
        box.bufs, box.last = bufs, last
        if run is None:
            return None

        def quiet() -> Any:  # a copy's result is not the checked one
            keep = box.last
            result = run()
            box.last = keep
            return result

        return quiet

    return copy


# ---------------------------------------------------------------------------------- Triton


def load_fused_moe_kernel() -> tuple[Any, str]:
    """vLLM's Triton ``fused_moe_kernel``: from the installed vLLM, else its source file."""
    try:
        mod = importlib.import_module("vllm.model_executor.layers.fused_moe.fused_moe")
        return mod.fused_moe_kernel, f"vLLM's fused_moe_kernel ({mod.__name__})"
    except Exception as exc:
        path = os.environ.get("KERNELPOLICY_BENCH_VLLM_FUSED_MOE", "")
        if not path:
            raise RuntimeError(
                f"vLLM's fused_moe cannot be imported ({type(exc).__name__}) "
                "and $KERNELPOLICY_BENCH_VLLM_FUSED_MOE names no file"
            ) from None
    with open(path, encoding="utf-8") as src:
        tree = ast.parse(src.read())
    wanted = {"write_zeros_to_output", "fused_moe_kernel"}
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    if {f.name for f in funcs} != wanted:
        raise RuntimeError(f"{path}: no fused_moe_kernel / write_zeros_to_output")
    module = ast.Module(body=[*ast.parse("import triton\nimport triton.language as tl").body, *funcs], type_ignores=[])
    folder = tempfile.mkdtemp(prefix="kp-fused-moe-")
    target = os.path.join(folder, "kp_vllm_fused_moe_kernel.py")
    with open(target, "w", encoding="utf-8") as fh:  # triton.jit reads the kernel's source from a file
        fh.write(ast.unparse(module) + "\n")
    spec = importlib.util.spec_from_file_location("kp_vllm_fused_moe_kernel", target)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {target}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fused_moe_kernel, f"vLLM's fused_moe_kernel (source of {os.path.basename(path)})"


def _triton_config(torch: Any, e: int, inter: int, m: int) -> tuple[dict[str, int], str]:
    folder = os.environ.get("KERNELPOLICY_BENCH_TRITON_CONFIGS", "")
    device = torch.cuda.get_device_name().replace(" ", "_")
    name = f"E={e},N={inter},device_name={device},dtype=fp8_w8a8,block_shape=[128,128].json"
    path = os.path.join(folder, name)
    if folder and os.path.isfile(path):
        with open(path, encoding="utf-8") as fh:
            table = {int(k): v for k, v in json.load(fh).items() if k.isdigit()}  # skips `triton_version`
        return nearest_config(table, m), f"vLLM's tuned {name}"
    return default_triton_config(m), "vLLM's default config (no tuned file for this shape)"


def make_triton(env: Any, cell: Cell) -> Prepared:
    torch = env.torch
    kernel, kernel_how = env.fused_moe
    tl = importlib.import_module("triton.language")
    triton = importlib.import_module("triton")
    d = moe_data(env, cell)
    e, n2, h = cell.layer.experts, cell.layer.n, cell.layer.k
    inter, topk, m = n2 // 2, max(1, cell.layer.topk), cell.m
    if not routed_here(d.topk_ids, e):
        raise NotRunnable(f"no token of {m} is routed to this rank's {e} experts (every block is another rank's)")
    config, config_how = _triton_config(torch, e, inter, m)
    bm = config["BLOCK_SIZE_M"]
    silu, how_act = _silu_mul(env)
    major = torch.cuda.get_device_capability()
    sab = swap_ab(config, major[0] * 10 + major[1])
    launch = {k: v for k, v in config.items() if k != "BLOCK_SIZE_K"}
    launch["SPLIT_K"] = 1
    bk = min(config["BLOCK_SIZE_K"], GROUP)
    hows: list[str] = []
    box = _Poisoned(torch)

    def build(ids: list[list[int]], topk_w: Any) -> Callable[[], Any] | None:
        if not routed_here(ids, e):
            return None
        lay = grouped(ids, e, bm, keep_remote=True)
        sentinel = m * topk
        sorted_ids = torch.tensor([p if p >= 0 else sentinel for p in lay.pairs], dtype=torch.int32, device="cuda")
        expert_ids = torch.tensor(lay.block_experts, dtype=torch.int32, device="cuda")
        post_pad = torch.tensor([lay.rows], dtype=torch.int32, device="cuda")
        cache1 = torch.empty((m, topk, n2), dtype=torch.bfloat16, device="cuda")
        act = torch.empty((m * topk, inter), dtype=torch.bfloat16, device="cuda")
        cache3 = torch.empty((m, topk, h), dtype=torch.bfloat16, device="cuda")
        quant1, q1, s1, how1 = env.quant(d.a, "row")
        quant2, q2, s2, how2 = env.quant(act, "row")
        hows[:] = [how1, how2]
        box.bufs = [cache1, act, cache3]

        def gemm(a: Any, a_s: Any, w: Any, w_s: Any, c: Any, top_k: int, weighted: bool) -> None:
            rows = lay.rows if a.shape[0] >= bm else min(lay.rows, a.shape[0] * top_k * bm)
            grid = (triton.cdiv(rows, bm) * triton.cdiv(w.shape[1], config["BLOCK_SIZE_N"]),)
            kernel[grid](
                a, w, c, None, a_s, w_s, topk_w, sorted_ids, expert_ids, post_pad,
                w.shape[1], w.shape[2], rows, a.shape[0] * top_k,
                a.stride(0), a.stride(1), w.stride(0), w.stride(2), w.stride(1), c.stride(1), c.stride(2),
                a_s.stride(0), a_s.stride(1), w_s.stride(0), w_s.stride(2), w_s.stride(1), 0, 0, GROUP, GROUP,
                MUL_ROUTED_WEIGHT=weighted, top_k=top_k, compute_type=tl.bfloat16, use_fp8_w8a8=True,
                use_int8_w8a8=False, use_int8_w8a16=False, per_channel_quant=False, naive_block_assignment=False,
                HAS_BIAS=False, BLOCK_SIZE_K=bk, SWAP_AB=sab, **launch,
            )  # fmt: skip

        def run() -> Any:
            quant1()
            gemm(q1, s1, d.w13, d.s13, cache1, topk, False)
            silu(act, cache1.view(-1, n2))
            quant2()
            gemm(q2, s2, d.w2, d.s2, cache3, 1, True)
            box.last = cache3.sum(dim=1)
            return box.last

        return run

    run = build(d.topk_ids, d.topk_w)
    assert run is not None
    return Prepared(
        run=run,
        poison=box.poison,
        error=lambda: _error(env, box, d.ref),
        tolerance=MOE_TOLERANCE,
        how=(
            f"{hows[0]} + {kernel_how}, {config_how}, BLOCK_M {bm}, swap_ab {sab} + {how_act} + {hows[1]}"
            " + sum over top-k"
        ),
        replicate=_replicate(env, cell, d, _keeping(box, build)),
        footprint=_touched(d.topk_ids, e, _per_expert(d)),
    )


# ---------------------------------------------------------------------- FlashInfer CUTLASS


def _swap_halves(torch: Any, x: Any) -> Any:
    """vLLM's ``swap_w13_to_w31``: FlashInfer's kernels read the gate-up weight as [up; gate]."""
    half = x.shape[1] // 2
    raw = x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x
    out = torch.cat([raw[:, half:], raw[:, :half]], dim=1).contiguous()
    return out.view(x.dtype)


def make_flashinfer_cutlass(env: Any, cell: Cell) -> Prepared:
    torch = env.torch
    fused = env.fi_moe
    d = moe_data(env, cell)
    e, h = cell.layer.experts, cell.layer.k
    total, m = max(cell.layer.total_experts, e), cell.m
    if not routed_here(d.topk_ids, e):
        raise NotRunnable(f"no token of {m} is routed to this rank's {e} experts")
    if total % e:
        raise NotRunnable(f"{total} experts do not split evenly into ranks of {e}")
    w31, s31 = _swap_halves(torch, d.w13), _swap_halves(torch, d.s13)
    out = torch.empty((m, h), dtype=torch.bfloat16, device="cuda")
    box = _Poisoned(torch, out)

    def build(ids: list[list[int]], topk_w: Any) -> Callable[[], Any] | None:
        if not routed_here(ids, e):
            return None
        selected = torch.tensor(ids, dtype=torch.int32, device="cuda")

        def run() -> Any:
            fused(
                input=d.a, token_selected_experts=selected, token_final_scales=topk_w, fc1_expert_weights=w31,
                fc2_expert_weights=d.w2, output_dtype=torch.bfloat16, quant_scales=[s31, d.s2], output=out,
                ep_size=total // e, ep_rank=0, use_deepseek_fp8_block_scale=True,
            )  # fmt: skip
            box.last = out
            return out

        return run

    run = build(d.topk_ids, d.topk_w)
    assert run is not None
    return Prepared(
        run=run,
        poison=box.poison,
        error=lambda: _error(env, box, d.ref),
        tolerance=MOE_TOLERANCE,
        how=(
            "FlashInfer cutlass_fused_moe (use_deepseek_fp8_block_scale: BF16 in, quantised inside; w13 as w31, "
            f"block scales; EP size {total // e}, rank 0), as vLLM's FlashInferExperts calls it"
        ),
        replicate=_replicate(env, cell, d, _keeping(box, build)),
        footprint=_touched(d.topk_ids, e, _per_expert(d)),
    )


def _needs_fi_moe(env: Any) -> str | None:
    return None if env.fi_moe is not None else f"FlashInfer's cutlass_fused_moe unavailable ({env.fi_moe_why})"


def _needs_dg(env: Any) -> str | None:
    if env.deep_gemm is None:
        return f"DeepGEMM unavailable ({env.deep_gemm_why})"
    return None if hasattr(env.deep_gemm, "m_grouped_fp8_gemm_nt_contiguous") else "DeepGEMM has no grouped FP8 GEMM"


def _needs_fused_moe(env: Any) -> str | None:
    return None if env.fused_moe is not None else f"vLLM's Triton fused_moe unavailable ({env.fused_moe_why})"


#: (path, backend) -> (make, needs) of the MoE runners.
MOE_TABLE: Final = {
    ("moe", "deep_gemm"): (make_deep_gemm, _needs_dg),
    ("moe", "triton"): (make_triton, _needs_fused_moe),
    ("moe", "flashinfer_cutlass"): (make_flashinfer_cutlass, _needs_fi_moe),
}
