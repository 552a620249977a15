"""The kernel an SGLang linear layer will call, named the way SGLang's own code decides it.

SGLang picks the GEMM of most linear layers when it builds the layer's quant method (block FP8:
``dispatch_w8a8_block_fp8_linear``), but per-tensor and per-channel FP8 layers go through
``apply_fp8_linear`` on every call, FP4 layers through the published FP4 runner, and weight-only
layers through Marlin. :func:`linear_kernel` evaluates, for one layer and its quant method, the
conditions those functions test (read from the sglang 0.5.23 wheel,
``sglang/srt/layers/quantization/``):

- ``Fp8LinearMethod``: Marlin when it took Marlin; block FP8: the dispatched function; a
  per-tensor checkpoint: its scales made per-channel where sgl-kernel's CUTLASS runs
  (``cutlass_fp8_supported()``, compute capability 9.0+ with CUDA 12), so ``apply_fp8_linear``
  calls ``fp8_scaled_mm`` (CUTLASS), or ``triton_scaled_mm`` with ``USE_TRITON_W8A8_FP8_KERNEL=1``
  or a shape CUTLASS cannot tile; on compute capability 12.x the scales are requantized to one
  per tensor and ``torch._scaled_mm`` runs (``process_weights_after_loading``);
- ``CompressedTensorsW8A8Fp8``: block: the dispatched function; ``tensor``: one scale per tensor
  (``requantize_with_max_scale``), so ``torch._scaled_mm``; ``channel``: CUTLASS as above;
- ``CompressedTensorsWNA16``, ``GPTQMarlinLinearMethod``, AWQ's Marlin scheme: Marlin;
  ``CompressedTensorsW8A16Fp8``: Marlin's FP8 linear;
- ``ModelOptFp8LinearMethod``: Marlin when it took Marlin; else FlashInfer's ``bmm_fp8``
  (static scales, FlashInfer importable, sm90/sm100/sm12x, both sizes multiples of 16;
  on 12.x a one-row step may first take SGLang's SM12x GEMV), else ``apply_fp8_linear``;
- ``ModelOptFp4LinearMethod``: the published FP4 runner (``--fp4-gemm-backend``): Marlin's FP4
  linear, or ``fp4_gemm`` with that FlashInfer backend.

Standalone on purpose (the standard library only, SGLang's modules read from ``sys.modules``):
the plugin imports it, and the simulated-GPU probe, which does not import kernelpolicy, loads
this file by its path, so both name a layer with one piece of code.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Final

__all__ = ["linear_kernel"]

_FP8_UTILS: Final = "sglang.srt.layers.quantization.fp8_utils"
_FP4_UTILS: Final = "sglang.srt.layers.quantization.fp4_utils"
_FP8_KERNEL: Final = "sglang.kernels.ops.gemm.fp8_kernel"

CUTLASS: Final = "fp8_scaled_mm"
TRITON: Final = "triton_scaled_mm"
TUNED: Final = "fp8_scaled_mm+tuned_triton_scaled_mm"
TORCH: Final = "torch._scaled_mm"
BMM: Final = "flashinfer_bmm_fp8"
BMM_SM12X: Final = "flashinfer_bmm_fp8+sm120_fp8_gemv"
FP8_MARLIN: Final = "apply_fp8_marlin_linear"
MARLIN: Final = "gptq_marlin_gemm"
FP4_MARLIN: Final = "apply_fp4_marlin_linear"


def _function_name(fn: Any) -> str | None:
    name = getattr(getattr(fn, "func", fn), "__name__", None)  # functools.partial too
    return name if isinstance(name, str) else None


def _module(name: str) -> Any:
    return sys.modules.get(name)


def _major() -> int | None:
    torch = _module("torch")
    try:
        return int(torch.cuda.get_device_capability()[0])
    except Exception:
        return None


def _sizes(layer: Any) -> tuple[int | None, int | None]:
    n = getattr(layer, "output_size_per_partition", None)
    k = getattr(layer, "input_size_per_partition", None)
    return (n if isinstance(n, int) else None, k if isinstance(k, int) else None)


def _multiples_of_16(layer: Any) -> bool:
    """Both GEMM sizes multiples of 16 (an unknown size counts as one)."""
    return all(v is None or v % 16 == 0 for v in _sizes(layer))


def _triton_switch() -> bool:
    """``USE_TRITON_W8A8_FP8_KERNEL``, as ``fp8_utils`` read it at import."""
    fp8_utils = _module(_FP8_UTILS)
    if fp8_utils is not None and hasattr(fp8_utils, "use_triton_w8a8_fp8_kernel"):
        return bool(fp8_utils.use_triton_w8a8_fp8_kernel)
    return os.environ.get("USE_TRITON_W8A8_FP8_KERNEL", "").strip().lower() in ("1", "true", "yes", "on")


def _cutlass_supported() -> bool:
    fp8_utils = _module(_FP8_UTILS)
    try:
        return bool(fp8_utils.cutlass_fp8_supported())
    except Exception:
        return False


def _tuned_triton(layer: Any) -> bool:
    """A tuned Triton tile ships for this GPU and shape (``get_w8a8_channelwise_fp8_configs``)."""
    if os.environ.get("SGLANG_ENABLE_FP8_GEMM_CONFIG_TUNE", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    kernel = _module(_FP8_KERNEL)
    n, k = _sizes(layer)
    if kernel is None or n is None or k is None:
        return False
    try:
        return bool(kernel.get_w8a8_channelwise_fp8_configs(n, k))
    except Exception:
        return False


def _channelwise(cutlass: bool, layer: Any) -> str:
    """``apply_fp8_linear`` with one weight scale per output channel."""
    if not cutlass:
        return TORCH
    if not _multiples_of_16(layer) or _triton_switch():
        return TRITON
    return TUNED if _tuned_triton(layer) else CUTLASS


def _fp8_linear(method: Any, layer: Any) -> str | None:
    if getattr(method, "use_mxfp8", False) or getattr(method, "block_fp8_as_mxfp8", False):
        return None  # an MXFP8 view: its own backend
    if getattr(method, "block_quant", False):
        return _function_name(getattr(method, "w8a8_block_fp8_linear", None))
    cutlass = bool(getattr(method, "cutlass_fp8_supported", False))
    serialized = bool(getattr(getattr(method, "quant_config", None), "is_checkpoint_fp8_serialized", True))
    if serialized and cutlass and _major() == 12:  # requantized to one scale per tensor
        return TORCH
    return _channelwise(cutlass, layer)


def _w8a8_fp8(scheme: Any, layer: Any) -> str | None:
    if getattr(scheme, "weight_block_size", None) is not None:
        return _function_name(getattr(scheme, "w8a8_block_fp8_linear", None))
    strategy = str(getattr(getattr(scheme, "strategy", None), "value", getattr(scheme, "strategy", "")))
    if strategy == "tensor":  # requantized to one scale per layer
        return TORCH
    return _channelwise(_cutlass_supported(), layer) if strategy == "channel" else None


def _compressed_tensors(method: Any, layer: Any) -> str | None:
    scheme = getattr(layer, "scheme", None)
    kind = type(scheme).__name__
    if kind == "CompressedTensorsW8A8Fp8":
        return _w8a8_fp8(scheme, layer)
    return {"CompressedTensorsWNA16": MARLIN, "CompressedTensorsW8A16Fp8": FP8_MARLIN}.get(kind)


def _modelopt_fp8(method: Any, layer: Any) -> str:
    fp8_utils = _module(_FP8_UTILS)
    bmm = bool(getattr(method, "enable_flashinfer_bmm", False)) and bool(
        getattr(getattr(method, "quant_config", None), "is_checkpoint_fp8_serialized", True)
    )
    if bmm and _multiples_of_16(layer) and fp8_utils is not None and hasattr(fp8_utils, "flashinfer_bmm_fp8"):
        return BMM_SM12X if getattr(method, "use_sm120_fp8", False) else BMM
    return _channelwise(bool(getattr(method, "cutlass_fp8_supported", False)), layer)


def _modelopt_fp4(method: Any, layer: Any) -> str | None:
    fp4_utils = _module(_FP4_UTILS)
    try:
        backend = fp4_utils.get_fp4_gemm_runner_backend()
    except Exception:
        return None
    value = str(getattr(backend, "value", backend))
    if value == "marlin":
        return FP4_MARLIN
    return None if value == "auto" else f"fp4_gemm[{value}]"


def _awq(method: Any, layer: Any) -> str | None:
    engine = getattr(getattr(layer, "scheme", None), "kernel", None)
    return MARLIN if "Marlin" in type(engine).__name__ else None


def _marlin(method: Any, layer: Any) -> str:
    return MARLIN


#: Quant method class -> how its ``apply`` picks the GEMM.
_METHODS: Final = {
    "Fp8LinearMethod": _fp8_linear,
    "CompressedTensorsLinearMethod": _compressed_tensors,
    "ModelOptFp8LinearMethod": _modelopt_fp8,
    "ModelOptFp4LinearMethod": _modelopt_fp4,
    "GPTQMarlinLinearMethod": _marlin,
    "AWQLinearMethod": _awq,
}


def linear_kernel(method: Any, layer: Any) -> str | None:
    """SGLang's name of the GEMM *layer* will run through its quant *method* (see the module
    text); ``None`` where this does not know the method (SGLang's choice is then not named)."""
    if method is None:
        return None
    kind = type(method).__name__
    if getattr(method, "use_marlin", False) and kind in ("Fp8LinearMethod", "ModelOptFp8LinearMethod"):
        return FP8_MARLIN
    pick = _METHODS.get(kind)
    if pick is not None:
        return pick(method, layer)
    if getattr(method, "block_quant", True) and hasattr(method, "w8a8_block_fp8_linear"):
        return _function_name(method.w8a8_block_fp8_linear)  # another method with a dispatched block-FP8 GEMM
    return None
