"""kernelpolicy: one consistent, explained kernel-backend decision for every code path.

::

    import kernelpolicy as kp
    policy = kp.load_policy()
    facts = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", policy=policy)
    decision = kp.resolve(facts, policy)
    decision.paths["moe"].backend      # "triton"

``import kernelpolicy`` imports no torch, triton, deep_gemm or vllm; the names below load
their modules on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._moved import install as _install_moved
from ._version import __version__

_install_moved()  # the old module paths, for one release (kernelpolicy._moved)

if TYPE_CHECKING:
    from .decision import Candidate, Decision, PathDecision
    from .deployment import facts_for
    from .dsl.loader import load_policy
    from .errors import (
        FactError,
        KernelPolicyError,
        PolicyError,
        UnknownGPUError,
        UnknownModelError,
    )
    from .facts import Facts
    from .policy import Policy
    from .reporters import BaseReporter
    from .resolver import ContradictionError, resolve

_WHERE = {
    "BaseReporter": "reporters",
    "Candidate": "decision",
    "ContradictionError": "resolver",
    "Decision": "decision",
    "FactError": "errors",
    "Facts": "facts",
    "KernelPolicyError": "errors",
    "PathDecision": "decision",
    "Policy": "policy",
    "PolicyError": "errors",
    "UnknownGPUError": "errors",
    "UnknownModelError": "errors",
    "facts_for": "deployment",
    "load_policy": "dsl.loader",
    "resolve": "resolver",
}

__all__ = [
    "BaseReporter",
    "Candidate",
    "ContradictionError",
    "Decision",
    "FactError",
    "Facts",
    "KernelPolicyError",
    "PathDecision",
    "Policy",
    "PolicyError",
    "UnknownGPUError",
    "UnknownModelError",
    "__version__",
    "facts_for",
    "load_policy",
    "resolve",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'kernelpolicy' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
