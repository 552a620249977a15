"""vLLM's names for kernelpolicy's attention backends (issue #39), by release.

kernelpolicy's attention ids are kernel families: one id for a family's MHA and MLA kernels.
vLLM's ``AttentionBackendEnum`` names them apart (``FLASHINFER`` and ``FLASHINFER_MLA``), and its
sparse FlashInfer MLA kernel has one name per GPU family in some releases. :func:`vllm_names` says
which names stand for a decided backend, the first the release has being the one to select.
Release data: no vLLM import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["MHA_NAMES", "MLA_NAMES", "id_of", "vllm_names"]

#: Non-MLA models: kernelpolicy id -> vLLM's names.
MHA_NAMES: Final[Mapping[str, tuple[str, ...]]] = {
    "flash_attn": ("FLASH_ATTN",),
    "flashinfer": ("FLASHINFER",),
    "triton_attn": ("TRITON_ATTN",),
    "flex_attention": ("FLEX_ATTENTION",),
}
#: MLA models: kernelpolicy id -> vLLM's names (the sparse FlashInfer kernel by GPU family).
MLA_NAMES: Final[Mapping[str, tuple[str, ...]]] = {
    "flash_attn": ("FLASH_ATTN_MLA",),
    "flashinfer": ("FLASHINFER_MLA",),
    "triton_attn": ("TRITON_MLA",),
    "flashmla": ("FLASHMLA",),
    "cutlass_mla": ("CUTLASS_MLA",),
    "flashmla_sparse": ("FLASHMLA_SPARSE",),
    "flashinfer_mla_sparse": ("FLASHINFER_MLA_SPARSE",),
}
_SPARSE_BY_FAMILY: Final = {"sm90": "FLASHINFER_MLA_SPARSE_SM90", "sm120": "FLASHINFER_MLA_SPARSE_SM120"}


def vllm_names(backend: str, *, mla: bool, family: str | None = None) -> tuple[str, ...]:
    """vLLM's ``AttentionBackendEnum`` names for *backend*, most specific first (empty: vLLM has
    no name for it, as for SGLang's TRT-LLM backends, which vLLM runs inside ``flashinfer``)."""
    names = (MLA_NAMES if mla else MHA_NAMES).get(backend, ())
    if mla and backend == "flashinfer_mla_sparse" and family in _SPARSE_BY_FAMILY:
        return (_SPARSE_BY_FAMILY[family], *names)
    return names


def id_of(name: str | None) -> str | None:
    """kernelpolicy's attention id for vLLM's ``AttentionBackendEnum`` *name* (``FLASHINFER_MLA``
    -> ``flashinfer``), or ``None`` for a name kernelpolicy has no id for (``TREE_ATTN``, ...)."""
    if not name:
        return None
    for table in (MHA_NAMES, MLA_NAMES):
        for backend, names in table.items():
            if name in names:
                return backend
    if name in _SPARSE_BY_FAMILY.values():
        return "flashinfer_mla_sparse"
    return None
