"""Apply the decided attention backend in vLLM (issue #39).

vLLM 0.26 to 0.34 (the releases whose wheels the attention scan reads) take the attention backend
from ``VllmConfig.attention_config.backend`` (an ``AttentionBackendEnum``, what
``--attention-backend`` sets): ``vllm/v1/attention/selector.py`` ``get_attn_backend`` reads it from
the current config each time a layer asks, and ``CudaPlatform.get_attn_backend_cls`` validates
it and fails hard when the backend cannot run. So the plugin sets that field on the live config
before the model's layers are built (the first selection point the plugin sees runs at config
time); the ``VLLM_ATTENTION_BACKEND`` variable of older releases is read by none of them.

An operator's own ``--attention-backend`` (or ``--attention-config '{"backend": ...}'``) is a fact
of the decision (an explicit choice, ``deploy.attention_backend``). vLLM's own model code also sets
``attention_config.backend`` while it builds the config (gemma-4 on sm12x without FA4:
``TRITON_ATTN``), so the operator's value is read before that code runs: the plugin wraps
``VllmConfig.try_verify_and_update_config`` (:func:`mark_operator_backend`), which keeps it on the
``AttentionConfig`` (it travels with the config to the engine core and the workers).
"""

from __future__ import annotations

from typing import Any, Final

from ...releases.vllm.attention import vllm_names

__all__ = ["MARK", "apply_attention", "mark_operator_backend", "operator_backend"]

#: the attribute of vLLM's ``AttentionConfig`` that keeps the operator's backend (its enum name,
#: ``""`` for none), set before vLLM's model code can change ``backend``
MARK: Final = "__kernelpolicy_operator_backend__"


def mark_operator_backend(vllm_config: Any) -> None:
    """Keep *vllm_config*'s attention backend as the operator set it (once: a later call, after
    vLLM's model code ran, keeps the first reading)."""
    attention_config = getattr(vllm_config, "attention_config", None)
    if attention_config is None or not hasattr(attention_config, "backend"):
        return
    if MARK in getattr(attention_config, "__dict__", {}):
        return
    backend = attention_config.backend
    name = getattr(backend, "name", None) if backend is not None else ""
    object.__setattr__(attention_config, MARK, str(name if name is not None else backend))


def operator_backend(vllm_config: Any) -> str | None:
    """The attention backend the operator set (vLLM's enum name), or ``None``: none set, or a
    config the plugin did not see being built (then nothing is read as the operator's)."""
    attention_config = getattr(vllm_config, "attention_config", None)
    value = getattr(attention_config, "__dict__", {}).get(MARK) if attention_config is not None else None
    return value or None


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
