"""The newest release the rule tables know, as facts: what a stale ``until`` is judged by.

A *release key* is a version fact that implications read and none sets (``vllm.version``: a
release implies the DeepGEMM it vendors and the Triton it pins). The newest release of such
a key is the highest version point some implication's test on it accepts. Its facts are that
version, completed by every implication that follows from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import Version

from ..dsl.conditions import tests_of
from ..facts.keys import Kind
from ..facts.record import Facts
from ..policy import Policy
from ..resolver import apply_implications
from .domain import _version_points

__all__ = ["newest_release"]


def newest_release(policy: Policy) -> tuple[dict[str, Version], Mapping[str, Any]]:
    """``(release versions, typed facts)`` of the newest release *policy*'s implications know.

    Both are empty when no implication reads a release key.
    """
    set_keys = {k for imp in policy.implications for k in imp.sets}
    tests = [t for imp in policy.implications for t in tests_of(imp.when)]
    releases: dict[str, Version] = {}
    for key in sorted({t.key for t in tests if t.kind is Kind.VERSION} - set_keys):
        mine = [t for t in tests if t.key == key]
        for point in reversed(_version_points(mine)):
            if any(t.match(point) for t in mine):
                releases[key] = point
                break
    if not releases:
        return {}, {}
    values: dict[str, Any] = {k: str(v) for k, v in releases.items()}
    return releases, apply_implications(Facts.from_values(values, source="user"), policy).typed()
