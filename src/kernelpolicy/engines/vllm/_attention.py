"""Apply the decided attention backend in vLLM (issue #39).

vLLM 0.26 to 0.34 (the releases whose wheels the attention scan reads) take the attention backend
from ``VllmConfig.attention_config.backend`` (an ``AttentionBackendEnum``, what
``--attention-backend`` sets): ``vllm/v1/attention/selector.py`` ``get_attn_backend`` reads it from
the current config each time a layer asks, and ``CudaPlatform.get_attn_backend_cls`` validates
it and fails hard when the backend cannot run. So the plugin sets that field on the live config
before the model's layers are built (the first selection point the plugin sees runs at config
time); the ``VLLM_ATTENTION_BACKEND`` variable of older releases is read by none of them.

An operator's own ``--attention-backend`` is a fact of the decision (an explicit choice): when the
decision keeps it, nothing changes; when a rule refused it, this sets the backend the decision
chose instead, and says so.
"""

from __future__ import annotations

from typing import Any

from ...releases.vllm.attention import vllm_names

__all__ = ["apply_attention"]


def apply_attention(vllm_config: Any, decision: Any, enum: Any | None = None) -> str | None:
    """Set ``vllm_config.attention_config.backend`` to the decision's attention backend.

    :param vllm_config: vLLM's live ``VllmConfig`` (anything with ``attention_config.backend``).
    :param decision: the resolved :class:`~kernelpolicy.decision.Decision`.
    :param enum: vLLM's ``AttentionBackendEnum`` (imported from vLLM when not given).
    :returns: the vLLM name now selected, or ``None`` when nothing was set: no attention decision
        (absent path, no valid backend), no vLLM name for it, or no ``attention_config`` (a release
        this does not know).
    """
    path = decision.paths.get("attention")
    backend = getattr(path, "backend", None)
    attention_config = getattr(vllm_config, "attention_config", None)
    if backend is None or attention_config is None or not hasattr(attention_config, "backend"):
        return None
    if enum is None:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        enum = AttentionBackendEnum
    facts = decision.facts
    mla = facts.get("model.mla") is True
    for name in vllm_names(str(backend), mla=mla, family=facts.get("gpu.family")):
        member = getattr(enum, name, None)
        if member is not None:
            attention_config.backend = member
            return name
    return None
