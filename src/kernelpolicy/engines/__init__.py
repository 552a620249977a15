"""Engines: one slice per inference engine (:mod:`.vllm`, :mod:`.sglang`) over the engine-free
core, and what their plugins share (:mod:`.agreement`: every rank of a deployment decides alike).

``kernelpolicy.engines.engine_flags`` moved to :func:`kernelpolicy.render.flags.engine_flags`;
the name stays here for one release.
"""

from __future__ import annotations

__all__: list[str] = []


def __getattr__(name: str) -> object:
    if name == "engine_flags":  # the one-release shim of the old path
        from ..render.flags import engine_flags

        return engine_flags
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
