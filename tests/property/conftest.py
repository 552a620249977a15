"""Property suites: no compiled-policy cache, and optional planted resolver bugs.

``KERNELPOLICY_PLANT_BUG`` plants a known bug in the resolver for the whole run, to show that
the property suite catches it (see docs/planted-bug.md):

- ``warmup``: the warmup is computed independently of the paths (every JIT backend of the
  catalog is warmed, whatever the paths chose);
- ``deny-dense-only``: a ``deny`` rule without ``paths`` applies to ``dense`` only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import pytest

from kernelpolicy import policy as _policy
from kernelpolicy import resolver as _resolver
from kernelpolicy.decision import Candidate, PathDecision


def _warmup_everything(self: _resolver._Resolution, paths: Mapping[str, PathDecision]) -> PathDecision:
    policy = self.policy
    kernels = tuple(f"{b}.{p}" for p in _resolver.DECIDED_PATHS for b, e in policy.backends[p].items() if e.warmup)
    return PathDecision("warmup", None, tuple(Candidate(k, "chosen") for k in kernels), kernels=kernels)


def _applies_dense_only(self: _policy.Rule, path: str) -> bool:
    if self.paths is None:
        return path == "dense" if self.kind == "deny" else True
    return path in self.paths


PLANTS: dict[str, tuple[object, str, object]] = {"warmup": (_resolver._Resolution, "_warmup", _warmup_everything)}
PLANTS["deny-dense-only"] = (_policy.Rule, "applies_to", _applies_dense_only)

_plant = os.environ.get("KERNELPOLICY_PLANT_BUG", "")
if _plant:
    if _plant not in PLANTS:
        raise pytest.UsageError(f"KERNELPOLICY_PLANT_BUG: one of {', '.join(PLANTS)}")
    target, name, fn = PLANTS[_plant]
    setattr(target, name, fn)  # for the whole run: nothing is restored, this run is meant to fail


@pytest.fixture(autouse=True, scope="package")
def _no_policy_cache() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELPOLICY_NO_CACHE", "1")
        yield
