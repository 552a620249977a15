"""SGLang's names for what runs, per kernelpolicy backend (read from the 0.5.12.post1 and 0.5.23
wheels: the functions ``dispatch_w8a8_block_fp8_linear`` in
``sglang/srt/layers/quantization/fp8_utils.py`` returns, and the kernels the per-call linears
run, named by :func:`kernelpolicy.releases.sglang._linears.linear_kernel`), and the server-args
field of each flag.
"""

from __future__ import annotations

from typing import Final

from . import _linears

__all__ = [
    "ATTENTION_FIELDS",
    "ATTENTION_NAMES",
    "DENSE_FUNCTIONS",
    "FLAG_FIELDS",
    "attention_id",
    "attention_name",
    "dense_ids_of_name",
    "linear_run_by",
]

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
    # what ``apply_fp8_linear`` runs for a per-tensor/per-channel FP8 layer (0.5.23: its scales'
    # shape, ``cutlass_fp8_supported()``, ``USE_TRITON_W8A8_FP8_KERNEL``)
    _linears.CUTLASS: frozenset({"cutlass"}),  # sgl-kernel's CUTLASS scaled-mm
    _linears.TRITON: frozenset({"triton"}),
    _linears.TORCH: frozenset({"torch"}),
    # a tuned Triton tile for some batch sizes, CUTLASS for the rest: a per-call choice
    _linears.TUNED: frozenset(),
    # FlashInfer's per-tensor FP8 GEMM (ModelOpt FP8); on sm12x SGLang's own GEMV may take a
    # one-row step first (``try_sm120_fp8_linear``), bmm_fp8 runs every other batch
    _linears.BMM: frozenset({"flashinfer_cutlass"}),
    _linears.BMM_SM12X: frozenset({"flashinfer_cutlass"}),
    # weight-only Marlin (GPTQ, AWQ, compressed-tensors WNA16) and Marlin's FP4 linear
    _linears.MARLIN: frozenset({"marlin"}),
    _linears.FP4_MARLIN: frozenset({"marlin"}),
    # ModelOpt NVFP4 through the published ``--fp4-gemm-backend``
    "fp4_gemm[flashinfer_cutlass]": frozenset({"flashinfer_cutlass"}),
    "fp4_gemm[flashinfer_trtllm]": frozenset({"flashinfer_trtllm"}),
    "fp4_gemm[flashinfer_cutedsl]": frozenset({"flashinfer_cutedsl"}),
    "fp4_gemm[flashinfer_cudnn]": frozenset(),
}

#: SGLang flag -> the ``ServerArgs`` field it sets.
FLAG_FIELDS: Final = {
    "--fp8-gemm-backend": "fp8_gemm_runner_backend",
    "--fp4-gemm-backend": "fp4_gemm_runner_backend",
    "--moe-runner-backend": "moe_runner_backend",
    "--attention-backend": "attention_backend",
}

#: SGLang's ``--attention-backend`` value -> the kernelpolicy attention backend it runs (issue
#: #39; read from the 0.5.12-0.5.23 wheels' ``ATTENTION_BACKEND_CHOICES`` and
#: ``layers/attention/attention_registry.py``). FA3 and FA4 are one family (``flash_attn``);
#: ``trtllm_mha``/``trtllm_mla`` are FlashInfer's TRT-LLM-gen kernels, ids of their own here.
#: Values with no entry run kernels no kernelpolicy id names (the DeepSeek sparse backends
#: ``nsa``/``dsa``/``dsv4``, CuTe-DSL MLA, dual-chunk FlashAttention, other platforms' backends).
ATTENTION_NAMES: Final[dict[str, str]] = {
    "fa3": "flash_attn",
    "fa4": "flash_attn",
    "flashinfer": "flashinfer",
    "triton": "triton_attn",
    "trtllm_mha": "trtllm_mha",
    "trtllm_mla": "trtllm_mla",
    "flashmla": "flashmla",
    "cutlass_mla": "cutlass_mla",
    "flex_attention": "flex_attention",
}
#: The server-args fields of the attention backend: the base one and the per-phase ones that
#: win over it where set (``attention_backends_of`` in SGLang 0.5.23).
ATTENTION_FIELDS: Final = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


def attention_id(name: object) -> str | None:
    """The kernelpolicy attention backend SGLang's *name* runs (``None``: no id names it)."""
    return ATTENTION_NAMES.get(str(name)) if name is not None else None


def attention_name(backend: str, family: object = None) -> str | None:
    """SGLang's ``--attention-backend`` value for the kernelpolicy *backend* on a GPU of
    *family*: FlashAttention is ``fa4`` on SM100 (SGLang runs FA4 there), ``fa3`` elsewhere;
    ``None`` when SGLang has no value for it."""
    if backend == "flash_attn":
        return "fa4" if family == "sm100" else "fa3"
    return next((n for n, b in ATTENTION_NAMES.items() if b == backend), None)


def linear_run_by(method: object, layer: object = None) -> str | None:
    """The GEMM a linear layer runs through its quant *method*, by SGLang's name (Marlin's when it
    took Marlin, the dispatched block-FP8 function, what ``apply_fp8_linear`` calls for a
    per-tensor/per-channel layer, the FP4 runner, ...); ``None`` for a method this does not know.
    The simulated-GPU probe (``engines/sglang/testing/_probe.py``, which cannot import
    kernelpolicy) loads the same file (``_linears.py``) by its path."""
    return _linears.linear_kernel(method, layer)


def dense_ids_of_name(name: str) -> frozenset[str]:
    """The kernelpolicy dense backends a block-FP8 linear function of this name can be."""
    return DENSE_FUNCTIONS.get(name, frozenset())
