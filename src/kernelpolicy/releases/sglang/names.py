"""SGLang's names for what runs, per kernelpolicy backend (read from the 0.5.12.post1 and 0.5.23
wheels: the functions ``dispatch_w8a8_block_fp8_linear`` in
``sglang/srt/layers/quantization/fp8_utils.py`` returns), and the server-args field of each flag.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DENSE_FUNCTIONS", "FLAG_FIELDS", "dense_ids_of_name", "linear_run_by"]

#: Block-FP8 linear function name -> the kernelpolicy dense backends it can be.
DENSE_FUNCTIONS: Final[dict[str, frozenset[str]]] = {
    "deepgemm_w8a8_block_fp8_linear_with_fallback": frozenset({"deep_gemm"}),
    "flashinfer_gemm_w8a8_block_fp8_linear_with_fallback": frozenset({"flashinfer_trtllm", "flashinfer_cutlass"}),
    "flashinfer_deepgemm_w8a8_block_fp8_linear_with_fallback": frozenset({"flashinfer_deep_gemm"}),
    "cutlass_w8a8_block_fp8_linear_with_fallback": frozenset({"cutlass"}),
    "triton_w8a8_block_fp8_linear": frozenset({"triton"}),
    "torch_w8a8_block_fp8_linear": frozenset({"torch"}),
    "aiter_w8a8_block_fp8_linear": frozenset(),
    # not a dispatched function: the kernel ``Fp8LinearMethod.apply`` calls when it took Marlin
    # (``SGLANG_FORCE_FP8_MARLIN=1``, or sm80-sm88), whatever the dispatch said
    "apply_fp8_marlin_linear": frozenset({"marlin"}),
}

#: SGLang flag -> the ``ServerArgs`` field it sets.
FLAG_FIELDS: Final = {
    "--fp8-gemm-backend": "fp8_gemm_runner_backend",
    "--fp4-gemm-backend": "fp4_gemm_runner_backend",
    "--moe-runner-backend": "moe_runner_backend",
}


def linear_run_by(method: object) -> str | None:
    """The FP8 linear function an ``Fp8LinearMethod`` runs, by name: Marlin's when it took
    Marlin (``apply`` runs it whatever was dispatched), else the dispatched block-FP8 function;
    ``None`` for a per-tensor linear (``apply_fp8_linear`` picks per call) or another method.
    The simulated-GPU probe (``testing/sglang/_probe.py``, which cannot import kernelpolicy)
    reads a layer the same way."""
    if getattr(method, "use_marlin", False):
        return "apply_fp8_marlin_linear"
    fn = getattr(method, "w8a8_block_fp8_linear", None)
    if fn is None or not getattr(method, "block_quant", True):
        return None
    name = getattr(getattr(fn, "func", fn), "__name__", None)  # functools.partial too
    return name if isinstance(name, str) else None


def dense_ids_of_name(name: str) -> frozenset[str]:
    """The kernelpolicy dense backends a block-FP8 linear function of this name can be."""
    return DENSE_FUNCTIONS.get(name, frozenset())
