"""kernelpolicy: one consistent, explained kernel-backend decision for every code path.

::

    import kernelpolicy as kp
    policy = kp.load_policy()
    facts = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", policy=policy)
    decision = kp.resolve(facts, policy)
    decision.paths["moe"].backend      # "triton"

``import kernelpolicy`` imports no torch, triton, deep_gemm or vllm.
"""

from __future__ import annotations

from .decision import Candidate, Decision, PathDecision
from .dsl.loader import load_policy
from .errors import (
    FactError,
    KernelPolicyError,
    PolicyError,
    UnknownGPUError,
    UnknownModelError,
)
from .facts import Facts, facts_for
from .policy import Policy
from .reporters import BaseReporter
from .resolver import ContradictionError, resolve

from ._version import __version__

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
