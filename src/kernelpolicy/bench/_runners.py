"""Kernel runners: each backend id of a path, run the way the engine calls it.

The registry of adapters at the edge of bench. Each one imports its library lazily and says why
it cannot run (``unavailable``) instead of failing at import. Block-FP8 dense runners take BF16
activations, quantise them with vLLM's own CUDA op into the scale layout the backend reads (as
vLLM's linear kernels do), then run the GEMM, timed as one unit:

============================  ==================================================================
``flashinfer_deep_gemm``      M < 32: FlashInfer ``fp8_blockscale_gemm_sm90`` on BF16 input (it
                              quantises inside); M >= 32: the ``deep_gemm`` call below (vLLM's
                              ``FlashInferFp8DeepGEMMDynamicBlockScaledKernel``)
``deep_gemm``                 quant (M-major, TMA-aligned scales) + DeepGEMM ``fp8_gemm_nt``
``cutlass``                   quant (M-major scales) + vLLM's ``cutlass_scaled_mm``
``torch``                     quant (M-major scales) + ``torch.nn.functional.scaled_mm``
                              (BlockWise1x128 x BlockWise128x128, cuBLASLt), M padded to a
                              multiple of 4 and sliced back as vLLM's kernel does
                              (``$KERNELPOLICY_BENCH_TORCH_NO_PAD=1``: the bare call)
``triton``                    quant (row-major scales) + vLLM's ``w8a8_triton_block_scaled_mm``,
                              or kernelpolicy's re-implementation of its design without vLLM
============================  ==================================================================

MoE runners (``deep_gemm``, ``triton``: the whole expert computation) are in ``_moe_runners``.

Router runners (BF16 gate weights, FP32 logits): ``dsv3`` (vLLM's ``dsv3_router_gemm`` for
M <= 16, cuBLAS above, as vLLM dispatches), ``cublas`` (``torch.mm(out_dtype=float32)``),
``linear`` (``F.linear`` in BF16), ``linear_fp32`` (FP32 weights).

vLLM's ops come from ``vllm._custom_ops`` in a vLLM install, else from the libraries named in
``$KERNELPOLICY_BENCH_VLLM_LIBS`` (``:``-separated ``_C``/``_moe_C`` paths, for a machine that
carries them without the whole wheel). ``$KERNELPOLICY_BENCH_SKIP`` (``vllm``, ``deep_gemm``,
``flashinfer``, ``flashinfer_moe``, ``triton``, ``fused_moe``, comma-separated) leaves a library out: its
runners report ``not_run``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ._first_use import announce_first_use
from ._moe_runners import MOE_TABLE, load_fused_moe_kernel
from ._torch import FP8_MAX, GROUP, Lab, rel_error
from .protocol import Cell, NotRunnable, Prepared

__all__ = ["Env", "registry"]

#: Relative error above which an FP8 product is wrong (FP8 rounding alone gives ~4e-3).
FP8_TOLERANCE: Final = 2e-2
#: vLLM uses FlashInfer's BF16-input block-FP8 kernel below this M (accuracy above it).
FLASHINFER_MAX_M: Final = 32
#: cuBLASLt's block-scaled FP8 GEMM needs M a multiple of this; vLLM's torch kernel pads to it (vllm#49932).
TORCH_M_MULTIPLE: Final = 4
#: vLLM's dsv3_router_gemm takes at most this many tokens on Hopper; cuBLAS above.
DSV3_MAX_M: Final = 16


def _try(fn: Callable[[], Any], skipped: bool = False) -> tuple[Any, str | None]:
    if skipped:
        return None, "skipped by $KERNELPOLICY_BENCH_SKIP"
    try:
        return fn(), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:200]


class Env:
    """What this process can run: torch, vLLM's ops, DeepGEMM, FlashInfer, Triton (loaded once)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.lab = Lab(torch)
        skip = {x.strip() for x in os.environ.get("KERNELPOLICY_BENCH_SKIP", "").split(",") if x.strip()}
        self.vllm_ops, self.vllm_why = _try(self._load_vllm_ops, "vllm" in skip)
        self.deep_gemm, self.deep_gemm_why = _try(self._load_deep_gemm, "deep_gemm" in skip)
        self.flashinfer, self.flashinfer_why = _try(
            lambda: importlib.import_module("flashinfer.gemm").fp8_blockscale_gemm_sm90, "flashinfer" in skip
        )
        self.triton_mm, self.triton_why = _try(self._load_triton, "triton" in skip)
        self.fused_moe, self.fused_moe_why = _try(load_fused_moe_kernel, "triton" in skip or "fused_moe" in skip)
        self.fi_moe, self.fi_moe_why = _try(
            lambda: importlib.import_module("flashinfer.fused_moe").cutlass_fused_moe,
            "flashinfer" in skip or "flashinfer_moe" in skip,
        )

    def _load_vllm_ops(self) -> str:
        torch = self.torch
        libs = [p for p in os.environ.get("KERNELPOLICY_BENCH_VLLM_LIBS", "").split(":") if p]
        if libs:
            for lib in libs:
                torch.ops.load_library(lib)
            source = "libraries of $KERNELPOLICY_BENCH_VLLM_LIBS"
        else:
            importlib.import_module("vllm._custom_ops")
            source = "vllm._custom_ops"
        _ = torch.ops._C.per_token_group_fp8_quant  # raises when the op is missing
        return source

    def _load_deep_gemm(self) -> Any:
        try:
            return importlib.import_module("vllm.third_party.deep_gemm")
        except ImportError:
            return importlib.import_module("deep_gemm")

    def _load_triton(self) -> tuple[Callable[..., Any], str]:
        try:
            mod = importlib.import_module("vllm.model_executor.layers.quantization.utils.fp8_utils")
            return mod.w8a8_triton_block_scaled_mm, "vLLM's w8a8_triton_block_scaled_mm"
        except ImportError:
            from ._triton_w8a8 import block_fp8_mm

            return block_fp8_mm, "kernelpolicy's re-implementation of vLLM's w8a8 block-FP8 Triton design"

    def versions(self) -> dict[str, str]:
        out = {"torch": str(self.torch.__version__), "cuda": str(self.torch.version.cuda)}
        for name in ("triton", "vllm", "flashinfer"):
            try:
                from importlib.metadata import version

                out[name] = version(name if name != "flashinfer" else "flashinfer-python")
            except Exception:
                continue
        if self.deep_gemm is not None:
            out["deep_gemm"] = str(getattr(self.deep_gemm, "__version__", "?"))
        return out

    def runners_status(self) -> dict[str, str]:
        return {
            "vllm_ops": self.vllm_ops or f"unavailable ({self.vllm_why})",
            "deep_gemm": str(getattr(self.deep_gemm, "__name__", "")) or f"unavailable ({self.deep_gemm_why})",
            "flashinfer": "flashinfer.gemm" if self.flashinfer else f"unavailable ({self.flashinfer_why})",
            "triton": self.triton_mm[1] if self.triton_mm else f"unavailable ({self.triton_why})",
            "fused_moe": self.fused_moe[1] if self.fused_moe else f"unavailable ({self.fused_moe_why})",
            "flashinfer_moe": "flashinfer.fused_moe" if self.fi_moe else f"unavailable ({self.fi_moe_why})",
        }

    # ------------------------------------------------------------------ activation quantisation
    def quant(self, a: Any, layout: str) -> tuple[Callable[[], None], Any, Any, str]:
        """(run, q, scales, how): 1x128 group quantisation of *a* into buffers of *layout*:
        ``row`` (M, K/128) | ``mmajor`` stride (1, M) | ``tma`` stride (1, M rounded up to 4)."""
        torch = self.torch
        m, k = a.shape
        g = k // GROUP
        q = torch.empty((m, k), dtype=torch.float8_e4m3fn, device="cuda")
        if layout == "row":
            s = torch.empty((m, g), dtype=torch.float32, device="cuda")
        elif layout == "mmajor":
            s = torch.empty((g, m), dtype=torch.float32, device="cuda").t()
        else:
            s = torch.empty_strided((m, g), (1, (m + 3) // 4 * 4), dtype=torch.float32, device="cuda")
        if self.vllm_ops is not None:
            op = torch.ops._C.per_token_group_fp8_quant
            cm, tma = layout != "row", layout == "tma"

            def run() -> None:
                op(a, q, s, GROUP, 1e-10, -FP8_MAX, FP8_MAX, False, cm, tma)

            return run, q, s, f"vLLM per_token_group_fp8_quant ({layout} scales)"

        def native() -> None:
            v = a.float().view(m, g, GROUP)
            sc = v.abs().amax(dim=2).clamp(min=1e-10) / FP8_MAX
            q.copy_((v / sc[:, :, None]).clamp(-FP8_MAX, FP8_MAX).view(m, k).to(torch.float8_e4m3fn))
            s.copy_(sc)

        return native, q, s, f"torch-native group quant ({layout} scales; vLLM's op unavailable)"


class _Out:
    """The output of a call: a preallocated buffer the kernel writes, or the tensor it returns.

    Poisoning fills the buffer with NaN, and for a kernel that returns a fresh tensor frees a
    NaN-filled block of the same size first, so the caching allocator hands that block back: an
    element the kernel leaves unwritten stays NaN either way, never a stale correct value.
    """

    def __init__(self, env: Env, m: int, n: int, dtype: Any = None) -> None:
        self.torch = env.torch
        self.shape, self.dtype = (m, n), dtype or env.torch.bfloat16
        self.buf = env.lab.out(m, n, self.dtype)
        self.last: Any = None

    def poison(self) -> None:
        self.buf.fill_(float("nan"))
        scratch = self.torch.full(self.shape, float("nan"), dtype=self.dtype, device="cuda")
        del scratch
        self.last = None

    def keep(self, value: Any) -> Any:
        self.last = value
        return value

    def error(self, ref: Any) -> float:
        return rel_error(self.torch, self.last if self.last is not None else self.buf, ref)


@dataclass
class _Runner:
    backend: str
    path: str
    env: Env
    make: Callable[[Env, Cell], Prepared]
    needs: Callable[[Env], str | None]

    def unavailable(self) -> str | None:
        return self.needs(self.env)

    def prepare(self, cell: Cell) -> Prepared:
        prepared = self.make(self.env, cell)
        return announce_first_use("FlashInfer", prepared) if self.backend.startswith("flashinfer") else prepared


@dataclass
class _AttnRunner:
    backend: str
    path: str
    libs: Any
    make: Callable[[Any, Cell], Prepared]
    needs: Callable[[Any], str | None]

    def unavailable(self) -> str | None:
        return self.needs(self.libs)

    def prepare(self, cell: Cell) -> Prepared:
        prepared = self.make(self.libs, cell)
        return announce_first_use("FlashInfer", prepared) if self.backend.startswith("flashinfer") else prepared


Gemm = Callable[[Any, Any, Any, Any], Callable[[], Any]]


def _nbytes(*tensors: Any) -> int:
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors)


def _copy(d: Any) -> Any:
    """A :class:`DenseData` over fresh copies of the activations, weights and scales."""
    return type(d)(a=d.a.clone(), w=d.w, wq=d.wq.clone(), ws=d.ws.clone(), ref=d.ref)


def _dense(env: Env, cell: Cell, gemm: Gemm, layout: str, name: str) -> Prepared:
    d = env.lab.dense(cell)
    out = _Out(env, cell.m, cell.layer.n)

    def build(data: Any) -> tuple[Callable[[], Any], str]:
        quant, q, s, how = env.quant(data.a, layout)
        mm = gemm(q, s, data, out.buf)

        def run() -> Any:
            quant()
            return out.keep(mm())

        return run, how

    run, how = build(d)
    return Prepared(
        run=run,
        poison=out.poison,
        error=lambda: out.error(d.ref),
        tolerance=FP8_TOLERANCE,
        how=f"{how} + {name}",
        replicate=lambda: build(_copy(d))[0],
        footprint=_nbytes(d.a, d.wq, d.ws),
    )


def _deep_gemm_call(env: Env) -> Gemm:
    dg = env.deep_gemm

    def gemm(q: Any, s: Any, d: Any, out: Any) -> Callable[[], Any]:
        n, k = d.wq.shape
        try:
            sfb = dg.transform_sf_into_required_layout(d.ws, n, k, (1, 128, 128), is_sfa=False, disable_ue8m0_cast=True)
        except TypeError:
            sfb = dg.transform_sf_into_required_layout(d.ws, n, k, (128, 128), disable_ue8m0_cast=True)

        def run() -> Any:
            dg.fp8_gemm_nt((q, dg.get_mn_major_tma_aligned_tensor(s)), (d.wq, sfb), out, disable_ue8m0_cast=True)
            return out

        return run

    return gemm


def _make_deep_gemm(env: Env, cell: Cell) -> Prepared:
    return _dense(env, cell, _deep_gemm_call(env), "tma", "DeepGEMM fp8_gemm_nt")


def _make_flashinfer_deep_gemm(env: Env, cell: Cell) -> Prepared:
    if cell.m >= FLASHINFER_MAX_M:
        if env.deep_gemm is None:
            raise NotRunnable(f"DeepGEMM unavailable ({env.deep_gemm_why})")
        return _dense(env, cell, _deep_gemm_call(env), "tma", f"DeepGEMM fp8_gemm_nt (M >= {FLASHINFER_MAX_M})")
    if env.flashinfer is None:
        raise NotRunnable(f"FlashInfer unavailable ({env.flashinfer_why})")
    d = env.lab.dense(cell)
    out = _Out(env, cell.m, cell.layer.n)
    fi = env.flashinfer
    bf16 = env.torch.bfloat16

    def build(data: Any) -> Callable[[], Any]:
        return lambda: out.keep(fi(data.a, data.wq, None, data.ws, out=out.buf, out_dtype=bf16))

    return Prepared(
        run=build(d),
        poison=out.poison,
        error=lambda: out.error(d.ref),
        tolerance=FP8_TOLERANCE,
        how=f"FlashInfer fp8_blockscale_gemm_sm90 on BF16 input (M < {FLASHINFER_MAX_M})",
        replicate=lambda: build(_copy(d)),
        footprint=_nbytes(d.a, d.wq, d.ws),
    )


def _make_cutlass(env: Env, cell: Cell) -> Prepared:
    op = env.torch.ops._C.cutlass_scaled_mm

    def gemm(q: Any, s: Any, d: Any, out: Any) -> Callable[[], Any]:
        b, sb = d.wq.t(), d.ws.t()

        def run() -> Any:
            op(out, q, b, s, sb, None)
            return out

        return run

    return _dense(env, cell, gemm, "mmajor", "vLLM cutlass_scaled_mm")


def _make_torch(env: Env, cell: Cell) -> Prepared:
    torch = env.torch
    f = torch.nn.functional
    if not hasattr(f, "scaled_mm"):
        raise NotRunnable(f"torch {torch.__version__} has no torch.nn.functional.scaled_mm (block scaling)")
    pad = 0 if os.environ.get("KERNELPOLICY_BENCH_TORCH_NO_PAD") else (-cell.m) % TORCH_M_MULTIPLE

    def gemm(q: Any, s: Any, d: Any, out: Any) -> Callable[[], Any]:
        sb = d.ws.contiguous()
        blocks_k = sb.shape[1]
        if blocks_k % 4:
            sb = f.pad(sb, (0, 4 - blocks_k % 4))
        sb = sb.t()
        b = d.wq.t()
        st = f.ScalingType
        m = q.shape[0]

        def call(a: Any, sa: Any) -> Any:
            return f.scaled_mm(a, b, sa, st.BlockWise1x128, sb, st.BlockWise128x128, output_dtype=torch.bfloat16)

        if not pad:
            return lambda: call(q, s)

        def padded() -> Any:  # vLLM's BlockWiseTorchFP8ScaledMMLinearKernel: pad M, slice back
            qp = q.new_empty((m + pad, q.shape[1]))
            qp[:m] = q
            sp = s.new_empty((s.shape[1], m + pad)).t()
            sp[:m] = s
            return call(qp, sp)[:m]

        return padded

    how = "torch.nn.functional.scaled_mm BlockWise1x128 x BlockWise128x128 (cuBLASLt)"
    if pad:
        how += f", M padded to a multiple of {TORCH_M_MULTIPLE} as vLLM does"
    return _dense(env, cell, gemm, "mmajor", how)


def _make_triton(env: Env, cell: Cell) -> Prepared:
    mm, _ = env.triton_mm
    torch = env.torch

    def gemm(q: Any, s: Any, d: Any, out: Any) -> Callable[[], Any]:
        return lambda: mm(q, d.wq, s, d.ws, [GROUP, GROUP], output_dtype=torch.bfloat16)

    return _dense(env, cell, gemm, "row", env.triton_mm[1])


def _router(env: Env, cell: Cell, fn: Callable[[Any, Any, Any], Any], how: str) -> Prepared:
    """*fn(a, w, buf)* returns the logits (*buf* when it writes in place)."""
    d = env.lab.router(cell)
    out = _Out(env, cell.m, cell.layer.n, env.torch.float32)

    def build(a: Any, w: Any) -> Callable[[], Any]:
        return lambda: out.keep(fn(a, w, out.buf))

    return Prepared(
        run=build(d.a, d.w),
        poison=out.poison,
        error=lambda: out.error(d.ref),
        tolerance=FP8_TOLERANCE,
        how=how,
        replicate=lambda: build(d.a.clone(), d.w.clone()),
        footprint=_nbytes(d.a, d.w),
    )


def _make_dsv3(env: Env, cell: Cell) -> Prepared:
    torch = env.torch
    if cell.m > DSV3_MAX_M:
        return _router(env, cell, lambda a, w, o: torch.mm(a, w.t(), out_dtype=torch.float32), "cuBLAS (M > 16)")
    op = torch.ops._moe_C.dsv3_router_gemm
    return _router(env, cell, lambda a, w, o: (op(o, a, w), o)[1], "vLLM dsv3_router_gemm")


def _make_cublas(env: Env, cell: Cell) -> Prepared:
    torch = env.torch
    return _router(
        env, cell, lambda a, w, o: torch.mm(a, w.t(), out_dtype=torch.float32), "torch.mm(out_dtype=float32)"
    )


def _make_linear(env: Env, cell: Cell) -> Prepared:
    f = env.torch.nn.functional
    return _router(env, cell, lambda a, w, o: f.linear(a, w), "F.linear in BF16 (logits in BF16)")


def _make_linear_fp32(env: Env, cell: Cell) -> Prepared:
    torch = env.torch
    floats: dict[int, Any] = {}  # each copy of the BF16 weights gets its FP32 copy, made once

    def linear(a: Any, w: Any, o: Any) -> Any:
        if id(w) not in floats:
            floats[id(w)] = w.float()
        wf = floats[id(w)]
        return torch.nn.functional.linear(a.float(), wf)

    return _router(env, cell, linear, "F.linear in FP32 (FP32 weights)")


def _always(env: Env) -> str | None:
    return None


def _needs_vllm(env: Env) -> str | None:
    return None if env.vllm_ops else f"vLLM's ops unavailable ({env.vllm_why})"


def _needs_dg(env: Env) -> str | None:
    return None if env.deep_gemm is not None else f"DeepGEMM unavailable ({env.deep_gemm_why})"


def _needs_fi_or_dg(env: Env) -> str | None:
    if env.deep_gemm is None and env.flashinfer is None:
        return f"FlashInfer ({env.flashinfer_why}) and DeepGEMM ({env.deep_gemm_why}) unavailable"
    return None


def _needs_triton(env: Env) -> str | None:
    return None if env.triton_mm is not None else f"Triton unavailable ({env.triton_why})"


def _needs_moe_ops(env: Env) -> str | None:
    if not env.vllm_ops:
        return f"vLLM's ops unavailable ({env.vllm_why})"
    return None if hasattr(env.torch.ops._moe_C, "dsv3_router_gemm") else "vLLM's _moe_C has no dsv3_router_gemm"


#: (path, backend) -> (make, needs): the adapters of block-FP8 dense and BF16 router layers.
_TABLE: Final[dict[tuple[str, str], tuple[Callable[[Env, Cell], Prepared], Callable[[Env], str | None]]]] = {
    ("dense", "flashinfer_deep_gemm"): (_make_flashinfer_deep_gemm, _needs_fi_or_dg),
    ("dense", "deep_gemm"): (_make_deep_gemm, _needs_dg),
    ("dense", "cutlass"): (_make_cutlass, _needs_vllm),
    ("dense", "torch"): (_make_torch, _always),
    ("dense", "triton"): (_make_triton, _needs_triton),
    ("router", "dsv3"): (_make_dsv3, _needs_moe_ops),
    ("router", "cublas"): (_make_cublas, _always),
    ("router", "linear"): (_make_linear, _always),
    ("router", "linear_fp32"): (_make_linear_fp32, _always),
    **MOE_TABLE,
}


def registry(env: Env) -> Callable[[str, str], _Runner | _AttnRunner | None]:
    """The runner lookup over *env* (path, backend -> runner or None)."""

    from ._attn_runners import ATTN_TABLE, AttnLibs

    libs = AttnLibs(env.torch)

    def lookup(path: str, backend: str) -> _Runner | _AttnRunner | None:
        if path == "attention":
            found = ATTN_TABLE.get(backend)
            return None if found is None else _AttnRunner(backend, path, libs, found[0], found[1])
        entry = _TABLE.get((path, backend))
        if entry is None:
            return None
        return _Runner(backend, path, env, entry[0], entry[1])

    return lookup
