"""Engine vocabularies: how a decision reads as an engine's own flags and environment.

The names themselves are data (``rules/engines/<engine>.yaml``); each engine's spec
(:mod:`kernelpolicy.releases`) turns a decision into the settings that reproduce it on that
engine without the kernelpolicy plugin, where settings can; this module is the edge that adds
them to a decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..releases import DEFAULT

if TYPE_CHECKING:
    from ..decision import Decision, PathDecision
    from ..policy import EngineMap, Policy


class _Facts(Protocol):
    def get(self, key: str) -> object: ...


__all__ = ["engine_flags", "with_engine_flags"]


def engine_flags(
    paths: Mapping[str, PathDecision],
    engine: EngineMap,
    release: str | None = None,
    facts: _Facts | None = None,
) -> dict[str, Any]:
    """``{"env": {...}, "args": [...], "notes": [...]}`` that reproduce *paths* on *engine*, as
    that engine's spec renders them (:meth:`kernelpolicy.releases.engine.EngineSpec.render`).

    *release* names the engine release where its flags differ between releases (SGLang; the
    newest known release when None). *facts* are the decision's (their ``quant.scheme`` and
    ``quant.moe_scheme``: an engine may name one backend differently per format).
    """
    from ..releases import spec

    try:
        renderer = spec(engine.name)
    except KeyError:
        return {"env": {}, "args": [], "notes": [f"no flag mapping for engine `{engine.name}`"]}
    return renderer.render(paths, engine, release, facts)


def with_engine_flags(decision: Decision, policy: Policy, releases: Mapping[str, str] | None = None) -> Decision:
    """*decision* with the settings that reproduce it on its engine (``deploy.engine``; vLLM when
    unset), from *policy*'s vocabulary of that engine (its ``engine`` section): the resolver
    decides, the flags are rendered here, at the edge.

    Only the decision's own engine gets settings: a decision holds for one engine (its rules
    and the facts it assumed are that engine's), so another engine's flags rendered from it
    could name a backend that engine's decision rejects (``--fp8-gemm-backend cutlass`` for an
    SGLang on B200, from the vLLM decision). No settings when the policy has no vocabulary of it.

    *releases* names an engine's release where its flags differ between releases (``{"sglang":
    "0.5.23"}``; the newest known release of an engine not named).
    """
    name = str(decision.facts.get("deploy.engine") or DEFAULT)
    named = releases or {}
    vocabulary = policy.engines.get(name)
    engine = (
        {} if vocabulary is None else {name: engine_flags(decision.paths, vocabulary, named.get(name), decision.facts)}
    )
    return dataclasses.replace(decision, engine=engine)
