"""Attention runners: one paged-KV attention call of one layer of one rank, as vLLM makes it.

A cell's layer is an attention layer (:func:`.shapes.attention_layers`): query and KV heads per
rank, the head size, the KV-cache dtype and the phase. ``decode``: *m* sequences of *context*
tokens each, one new query token per sequence (timed under CUDA graphs as vLLM captures decode
batches); ``prefill``: one sequence of *m* new tokens, causal, no cached prefix (eager above the
capture sizes). The KV cache is paged in blocks of :data:`BLOCK_SIZE` tokens (vLLM's default),
its blocks scattered in a random order as a running engine's are; an FP8 cache holds e4m3 values
with per-tensor scales of 1 (the values are drawn to fit), the query stays BF16 except where the
kernel wants it FP8 (FlashAttention 3 with an FP8 cache: vLLM quantises the query first; that
quantisation is not in the time).

Candidates (backend ids of the attention path):

``flash_attn``   FlashAttention 3 from vLLM's ``vllm_flash_attn`` (the installed vLLM, else the folder
                 in ``$KERNELPOLICY_BENCH_VLLM_FA``: ``flash_attn_interface.py`` and
                 ``_vllm_fa3_C.abi3.so``): ``flash_attn_varlen_func`` with ``fa_version=3``, the
                 block table, ``seqused_k`` and the scheduler metadata vLLM computes ahead on sm90.
``flashinfer``   FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper`` (tensor cores, CUDA-graph buffers,
                 as vLLM 0.26's FlashInfer backend) and ``BatchPrefillWithPagedKVCacheWrapper``
                 (``backend="auto"``), NHD layout.
``triton_attn``  vLLM's ``unified_attention`` Triton kernel (the installed vLLM, else the source files
                 in ``$KERNELPOLICY_BENCH_VLLM_TRITON_ATTN``: ``triton_unified_attention.py`` and
                 ``triton_attention_helpers.py``, their vLLM imports replaced by what they read), with
                 vLLM's 16 softmax segments and its 3D-kernel threshold (128 // KV heads sequences).

The reference is the float32 attention (torch ``scaled_dot_product_attention``) over the first
:data:`REF_SEQS` sequences' dequantised cache.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import math
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .protocol import Cell, NotRunnable, Prepared

__all__ = ["ATTN_TABLE", "BLOCK_SIZE", "AttnLibs"]

#: vLLM's default KV-cache block size (``--block-size``).
BLOCK_SIZE: Final = 16
#: Sequences whose output is checked against the float reference.
REF_SEQS: Final = 4
#: vLLM's Triton backend: parallel softmax segments and the 2D kernel's minimal grid.
_SEGMENTS: Final = 16
_MIN_GRID_2D: Final = 128
_TOL: Final = {"bf16": 2e-2, "fp8": 8e-2}


class AttnLibs:
    """The attention kernels this process can load (each once, on first use)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._cache: dict[str, tuple[Any, str | None]] = {}

    def _get(self, name: str, load: Callable[[], Any]) -> tuple[Any, str | None]:
        if name not in self._cache:
            try:
                self._cache[name] = (load(), None)
            except Exception as exc:
                self._cache[name] = (None, f"{type(exc).__name__}: {str(exc).strip()[:200]}")
        return self._cache[name]

    def fa(self) -> tuple[Any, str | None]:
        return self._get("fa", _load_fa)

    def flashinfer(self) -> tuple[Any, str | None]:
        return self._get("flashinfer", lambda: importlib.import_module("flashinfer"))

    def triton(self) -> tuple[Any, str | None]:
        return self._get("triton", _load_unified_attention)


def _load_fa() -> Any:
    try:
        mod = importlib.import_module("vllm.vllm_flash_attn.flash_attn_interface")
    except Exception:
        folder = os.environ.get("KERNELPOLICY_BENCH_VLLM_FA", "")
        if not folder:
            raise RuntimeError(
                "vLLM's vllm_flash_attn is not importable and $KERNELPOLICY_BENCH_VLLM_FA names no folder"
            ) from None
        sys.path.insert(0, os.path.dirname(os.path.abspath(folder)))
        mod = importlib.import_module(os.path.basename(os.path.abspath(folder)) + ".flash_attn_interface")
    if not getattr(mod, "FA3_AVAILABLE", False):
        raise RuntimeError(f"FlashAttention 3 unavailable ({getattr(mod, 'FA3_UNAVAILABLE_REASON', '?')})")
    return mod


_PRELUDE: Final = """
import enum, logging, torch, triton
import triton.language as tl

class _Envs:
    VLLM_BATCH_INVARIANT = False

envs = _Envs()

def init_logger(name):
    return logging.getLogger(name)

class _Platform:
    def fp8_dtype(self):
        return torch.float8_e4m3fn

    def is_device_capability_family(self, family):
        major, _ = torch.cuda.get_device_capability()
        return major * 10 == family

current_platform = _Platform()

class KVQuantMode(enum.IntEnum):
    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    INT4_PER_TOKEN_HEAD = 4
    NVFP4 = 5
"""


def _load_unified_attention() -> Any:
    try:
        return importlib.import_module("vllm.v1.attention.ops.triton_unified_attention")
    except Exception:
        folder = os.environ.get("KERNELPOLICY_BENCH_VLLM_TRITON_ATTN", "")
        if not folder:
            raise RuntimeError(
                "vLLM's triton_unified_attention is not importable"
                " and $KERNELPOLICY_BENCH_VLLM_TRITON_ATTN names no folder"
            ) from None
    body: list[ast.stmt] = []
    for name in ("triton_attention_helpers.py", "triton_unified_attention.py"):
        with open(os.path.join(folder, name), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("vllm", "__future__"):
                continue
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "vllm" for a in node.names):
                continue
            body.append(node)
    module = ast.Module(body=[*ast.parse(_PRELUDE).body, *body], type_ignores=[])
    target = os.path.join(tempfile.mkdtemp(prefix="kp-triton-attn-"), "kp_vllm_unified_attention.py")
    with open(target, "w", encoding="utf-8") as fh:  # triton.jit reads the kernels' source from a file
        fh.write(ast.unparse(module) + "\n")
    spec = importlib.util.spec_from_file_location("kp_vllm_unified_attention", target)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {target}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kp_vllm_unified_attention"] = mod
    spec.loader.exec_module(mod)
    return mod


@dataclass
class AttnData:
    """One cell's paged attention inputs and its float reference."""

    q: Any  #: (tokens, hq, d) BF16
    kv: Any  #: (blocks, 2, BLOCK_SIZE, hkv, d) in the cache dtype
    block_table: Any  #: (seqs, blocks per seq) int32
    seq_lens: Any  #: (seqs,) int32
    cu_q: Any  #: (seqs + 1,) int32
    seqs: int
    q_len: int  #: query tokens per sequence
    context: int
    ref: Any  #: float32 (REF rows, hq, d)
    ref_rows: int

    @property
    def k(self) -> Any:
        return self.kv[:, 0]

    @property
    def v(self) -> Any:
        return self.kv[:, 1]


def _shape(cell: Cell) -> tuple[int, int, int, int, int, int]:
    """(seqs, q_len, context, hq, hkv, d) of *cell*."""
    layer = cell.layer
    if layer.phase == "decode":
        return cell.m, 1, layer.context, layer.n, layer.kv_heads, layer.k
    return 1, cell.m, cell.m, layer.n, layer.kv_heads, layer.k


def _data(torch: Any, cell: Cell) -> AttnData:
    _check_shape(cell)
    seqs, q_len, ctx, hq, hkv, d = _shape(cell)
    fp8 = cell.layer.kv_dtype == "fp8"
    dev = "cuda"
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234 + cell.m + ctx)
    per_seq = -(-ctx // BLOCK_SIZE)
    blocks = seqs * per_seq
    kv = torch.randn((blocks, 2, BLOCK_SIZE, hkv, d), generator=gen, device=dev, dtype=torch.bfloat16)
    if fp8:
        kv = kv.clamp(-448, 448).to(torch.float8_e4m3fn)
    order = torch.randperm(blocks, generator=gen, device=dev).to(torch.int32)
    block_table = order.view(seqs, per_seq).contiguous()
    seq_lens = torch.full((seqs,), ctx, dtype=torch.int32, device=dev)
    cu_q = torch.arange(0, (seqs + 1) * q_len, q_len, dtype=torch.int32, device=dev)
    q = torch.randn((seqs * q_len, hq, d), generator=gen, device=dev, dtype=torch.bfloat16)
    rows = min(seqs, REF_SEQS)
    refs = []
    scale = 1.0 / math.sqrt(d)
    for s in range(rows):
        idx = block_table[s].long()
        kk = kv[idx, 0].float().reshape(per_seq * BLOCK_SIZE, hkv, d)[:ctx]
        vv = kv[idx, 1].float().reshape(per_seq * BLOCK_SIZE, hkv, d)[:ctx]
        qq = q[s * q_len : (s + 1) * q_len].float()
        rep = hq // hkv
        kk = kk.repeat_interleave(rep, dim=1).transpose(0, 1).unsqueeze(0)  # (1, hq, ctx, d)
        vv = vv.repeat_interleave(rep, dim=1).transpose(0, 1).unsqueeze(0)
        qq = qq.transpose(0, 1).unsqueeze(0)  # (1, hq, q_len, d)
        # causal with the query at the sequence's end: decode (q_len 1) sees every key
        o = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, is_causal=q_len > 1, scale=scale)
        refs.append(o[0].transpose(0, 1))  # (q_len, hq, d)
        del kk, vv
    ref = torch.cat(refs, dim=0)
    return AttnData(q, kv, block_table, seq_lens, cu_q, seqs, q_len, ctx, ref, rows * q_len)


def _checker(torch: Any, d: AttnData, out: Any) -> tuple[Callable[[], None], Callable[[], float]]:
    def poison() -> None:
        out.fill_(float("nan"))

    def error() -> float:
        got = out[: d.ref_rows].float()
        if not bool(torch.isfinite(got).all()):
            return float("nan")
        return float((got - d.ref).norm() / d.ref.norm())

    return poison, error


def _copy(d: AttnData) -> AttnData:
    return AttnData(
        d.q.clone(), d.kv.clone(), d.block_table, d.seq_lens, d.cu_q, d.seqs, d.q_len, d.context, d.ref, d.ref_rows
    )


def _footprint(d: AttnData) -> int:
    return int(d.kv.numel()) * int(d.kv.element_size()) + int(d.q.numel()) * 2


def _prepared(
    torch: Any, cell: Cell, d: AttnData, bind: Callable[[AttnData, Any], Callable[[], object]], how: str
) -> Prepared:
    out = torch.empty_like(d.q)
    run = bind(d, out)
    poison, error = _checker(torch, d, out)

    def replicate() -> Callable[[], object]:
        c = _copy(d)
        return bind(c, torch.empty_like(c.q))

    return Prepared(
        run=run,
        poison=poison,
        error=error,
        tolerance=_TOL[cell.layer.kv_dtype],
        how=how,
        replicate=replicate,
        footprint=_footprint(d),
    )


# ------------------------------------------------------------------------------ FlashAttention 3


def make_flash_attn(libs: AttnLibs, cell: Cell) -> Prepared:
    torch = libs.torch
    fa, _ = libs.fa()
    d = _data(torch, cell)
    seqs, q_len, ctx, hq, hkv, hd = _shape(cell)
    fp8 = cell.layer.kv_dtype == "fp8"
    qdt = torch.float8_e4m3fn if fp8 else torch.bfloat16
    sched = fa.get_scheduler_metadata(
        batch_size=seqs,
        max_seqlen_q=q_len,
        max_seqlen_k=ctx,
        num_heads_q=hq,
        num_heads_kv=hkv,
        headdim=hd,
        cache_seqlens=d.seq_lens,
        qkv_dtype=qdt,
        cu_seqlens_q=d.cu_q,
        page_size=BLOCK_SIZE,
        causal=True,
    )
    ones = torch.ones((seqs, hkv), dtype=torch.float32, device="cuda") if fp8 else None

    def bind(x: AttnData, out: Any) -> Callable[[], object]:
        q = x.q.to(torch.float8_e4m3fn) if fp8 else x.q
        k, v = x.k, x.v

        def call() -> object:
            return fa.flash_attn_varlen_func(
                q,
                k,
                v,
                max_seqlen_q=q_len,
                cu_seqlens_q=x.cu_q,
                max_seqlen_k=ctx,
                seqused_k=x.seq_lens,
                softmax_scale=1.0 / math.sqrt(hd),
                causal=True,
                block_table=x.block_table,
                out=out,
                scheduler_metadata=sched,
                fa_version=3,
                q_descale=ones,
                k_descale=ones,
                v_descale=ones,
            )

        return call

    how = "vllm_flash_attn FA3 flash_attn_varlen_func (paged, scheduler metadata ahead)" + (
        "; FP8 query (quantised before the call, not timed)" if fp8 else ""
    )
    return _prepared(torch, cell, d, bind, how)


def _needs_fa(libs: AttnLibs) -> str | None:
    return libs.fa()[1]


# ------------------------------------------------------------------------------ FlashInfer


def make_flashinfer(libs: AttnLibs, cell: Cell) -> Prepared:
    torch = libs.torch
    fi, _ = libs.flashinfer()
    d = _data(torch, cell)
    seqs, _, ctx, hq, hkv, hd = _shape(cell)
    per_seq = -(-ctx // BLOCK_SIZE)
    indptr = torch.arange(0, (seqs + 1) * per_seq, per_seq, dtype=torch.int32, device="cuda")
    indices = d.block_table.reshape(-1).contiguous()
    last = torch.full((seqs,), ctx - (per_seq - 1) * BLOCK_SIZE, dtype=torch.int32, device="cuda")
    ws = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    kvdt = d.kv.dtype
    if cell.layer.phase == "decode":
        w = fi.BatchDecodeWithPagedKVCacheWrapper(
            ws,
            "NHD",
            use_cuda_graph=True,
            paged_kv_indptr_buffer=indptr,
            paged_kv_indices_buffer=indices,
            paged_kv_last_page_len_buffer=last,
            use_tensor_cores=True,
        )
        w.plan(
            indptr, indices, last, hq, hkv, hd, BLOCK_SIZE,
            q_data_type=torch.bfloat16, kv_data_type=kvdt, sm_scale=1.0 / math.sqrt(hd),
        )  # fmt: skip
        how = "FlashInfer BatchDecodeWithPagedKVCacheWrapper (tensor cores, CUDA-graph buffers, NHD)"
    else:
        w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="auto")
        w.plan(
            d.cu_q, indptr, indices, last, hq, hkv, hd, BLOCK_SIZE,
            causal=True, q_data_type=torch.bfloat16, kv_data_type=kvdt, sm_scale=1.0 / math.sqrt(hd),
        )  # fmt: skip
        how = "FlashInfer BatchPrefillWithPagedKVCacheWrapper (backend auto, causal, NHD)"

    def bind(x: AttnData, out: Any) -> Callable[[], object]:
        def call() -> object:
            return w.run(x.q, x.kv, out=out)

        return call

    return _prepared(torch, cell, d, bind, how)


def _needs_fi(libs: AttnLibs) -> str | None:
    return libs.flashinfer()[1]


# ------------------------------------------------------------------------------ Triton


def make_triton_attn(libs: AttnLibs, cell: Cell) -> Prepared:
    torch = libs.torch
    mod, _ = libs.triton()
    d = _data(torch, cell)
    seqs, q_len, ctx, hq, hkv, hd = _shape(cell)
    fp8 = cell.layer.kv_dtype == "fp8"
    threshold = max(1, _MIN_GRID_2D // hkv)
    padded = 1 << (hd - 1).bit_length()
    segm_out = torch.empty((threshold, hq, _SEGMENTS, padded), dtype=torch.float32, device="cuda")
    segm_max = torch.empty((threshold, hq, _SEGMENTS), dtype=torch.float32, device="cuda")
    segm_sum = torch.empty((threshold, hq, _SEGMENTS), dtype=torch.float32, device="cuda")
    one = torch.ones((), dtype=torch.float32, device="cuda")
    descale = one.expand((seqs, hkv))
    mode = mod.KVQuantMode.FP8_PER_TENSOR if fp8 else mod.KVQuantMode.NONE

    def bind(x: AttnData, out: Any) -> Callable[[], object]:
        k, v = x.k, x.v

        def call() -> object:
            return mod.unified_attention(
                q=x.q, k=k, v=v, out=out, cu_seqlens_q=x.cu_q, max_seqlen_q=q_len, seqused_k=x.seq_lens,
                max_seqlen_k=ctx, softmax_scale=1.0 / math.sqrt(hd), causal=True, window_size=(-1, -1),
                block_table=x.block_table, softcap=0, q_descale=None, k_descale=descale, v_descale=descale,
                seq_threshold_3D=threshold, num_par_softmax_segments=_SEGMENTS, softmax_segm_output=segm_out,
                softmax_segm_max=segm_max, softmax_segm_expsum=segm_sum, kv_quant_mode=mode,
            )  # fmt: skip

        return call

    how = f"vLLM unified_attention (Triton; 3D kernel below {threshold} sequences, {_SEGMENTS} segments)"
    return _prepared(torch, cell, d, bind, how)


def _needs_triton(libs: AttnLibs) -> str | None:
    return libs.triton()[1]


def _check_shape(cell: Cell) -> None:
    if cell.layer.kv_heads <= 0 or cell.layer.n % cell.layer.kv_heads:
        raise NotRunnable(f"{cell.layer.n} query heads over {cell.layer.kv_heads} KV heads")


#: backend -> (make, needs) on the attention path.
ATTN_TABLE: Final[dict[str, tuple[Callable[[AttnLibs, Cell], Prepared], Callable[[AttnLibs], str | None]]]] = {
    "flash_attn": (make_flash_attn, _needs_fa),
    "flashinfer": (make_flashinfer, _needs_fi),
    "triton_attn": (make_triton_attn, _needs_triton),
}
