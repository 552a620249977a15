"""The releases the rule tables and the scanned data know: what a stale ``until`` and a rule's
version bounds are judged by.

A *release key* is a version fact that implications read and none sets (``vllm.version``: a
release implies the DeepGEMM it vendors and the Triton it pins). The newest release of such
a key is the highest version point some implication's test on it accepts. Its facts are that
version, completed by every implication that follows from it.

The scanned data (``releases/*/releases.json``) lists every release of vLLM, SGLang and the
packages they pin; a bound naming a release outside it (``vllm.version: ">=0.21.1"``, never
published) is a ``check`` warning (:func:`unknown_release_bounds`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, Final

from packaging.version import Version

from ..dsl.conditions import Condition, Test, tests_of
from ..facts.keys import Kind
from ..facts.record import Facts
from ..policy import Origin, Policy
from ..releases import specs
from ..resolver import apply_implications
from .domain import _version_points
from .findings import Finding

__all__ = [
    "PACKAGE_OF",
    "known_releases",
    "release_points",
    "unknown_release",
    "unknown_release_bounds",
]


def release_points(policy: Policy) -> list[tuple[str, Version, Mapping[str, Any]]]:
    """``(key, version, typed facts)`` of every release *policy*'s implications tell apart: per
    release key an implication reads (``vllm.version``, ``sglang.version``), each version point of
    its bounds that some implication matches, with what the implications then set. Oldest first
    per key; empty when no implication reads a release key."""
    set_keys = {k for imp in policy.implications for k in imp.sets}
    tests = [t for imp in policy.implications for t in tests_of(imp.when)]
    out: list[tuple[str, Version, Mapping[str, Any]]] = []
    for key in sorted({t.key for t in tests if t.kind is Kind.VERSION} - set_keys):
        mine = [t for t in tests if t.key == key]
        for point in _version_points(mine):
            if any(t.match(point) for t in mine):
                facts = Facts.from_values({key: str(point)}, source="user")
                out.append((key, point, apply_implications(facts, policy).typed()))
    return out


# -- the releases the scanned data knows, and the rules' bounds checked against them

#: version fact -> the package whose releases it names (the facts whose bounds ``check`` verifies)
PACKAGE_OF: Final[Mapping[str, str]] = {
    "vllm.version": "vllm",
    "sglang.version": "sglang",
    "flashinfer.version": "flashinfer-python",
}


@functools.cache
def known_releases() -> Mapping[str, tuple[Version, ...]]:
    """Package -> every release the engines' data files know of it, oldest first: the releases
    the package index listed when they were written (``_scan --published``), the scanned engine
    releases and every release a scanned engine release pins (a pin names a published release,
    even one this index lacks, such as flashinfer-python 0.7.3)."""
    out: dict[str, set[Version]] = {}
    for spec in specs():
        engine, records = spec.name, spec.records()
        for package, versions in spec.published().items():
            out.setdefault(package, set()).update(Version(v) for v in versions)
        out.setdefault(engine, set()).update(Version(v) for v in records)
        for record in records.values():
            for package, version in record.get("requires", {}).items():
                out.setdefault(package, set()).add(Version(version))
    return {p: tuple(sorted(vs)) for p, vs in out.items()}


def _named(test: Test) -> list[str]:
    """The versions a version test writes (``>=0.21.1,<0.22`` -> ``0.21.1``, ``0.22``)."""
    if test.op == "spec":
        return [s.version for s in test.operand if not s.version.endswith(".*")]
    if test.op in ("eq", "in"):
        values = test.operand if test.op == "in" else (test.operand,)
        return [str(v) for v in values]
    return []


def unknown_release(package: str, written: str) -> str | None:
    """Why *written* names no release of *package* the data knows, or ``None`` when it does.

    ``X.Y`` names a series: it must have a release, unless it comes after every known one. A
    full version must be a known release, unless it comes after every known one (a bound on
    the next release is a promise, not a typo)."""
    releases = known_releases().get(package, ())
    try:
        v = Version(written)
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return None
    if not releases or v > releases[-1] or v in releases:
        return None
    if len(v.release) == 2 and not v.pre and not v.post:
        if any(r.release[:2] == v.release for r in releases):
            return None
        return f"{package} has no {written}.x release"
    near = [str(r) for r in releases if r.release[:2] == v.release[:2]]
    return f"{package} {written} was never published" + (
        f" (the {v.major}.{v.minor} series: {', '.join(near)})" if near else ""
    )


def _conditions(policy: Policy) -> Iterator[tuple[str, str, str, Origin, Condition]]:
    """``(kind, id, field, origin, condition)`` of every condition of every entry."""
    for r in policy.rules:
        yield "rule", r.id, "when", r.origin, r.when
        yield "rule", r.id, "require", r.origin, r.require
        if r.until is not None:
            yield "rule", r.id, "until", r.origin, r.until
    for u in policy.unsupported:
        yield "unsupported entry", u.id, "when", u.origin, u.when
    for imp in policy.implications:
        yield "implication", imp.id, "when", imp.origin, imp.when
        if imp.unless is not None:
            yield "implication", imp.id, "unless", imp.origin, imp.unless


def unknown_release_bounds(policy: Policy) -> Iterator[Finding]:
    """A warning for each version bound that names a release the scanned data does not know."""
    seen: set[tuple[str, str, str]] = set()
    for kind, rid, field_, origin, cond in _conditions(policy):
        for t in tests_of(cond):
            package = PACKAGE_OF.get(t.key)
            if package is None:
                continue
            for written in _named(t):
                why = unknown_release(package, written)
                if why is None or (rid, field_, written) in seen:
                    continue
                seen.add((rid, field_, written))
                yield Finding(
                    "unknown-release",
                    f"{kind} `{rid}` bounds `{t.key}` at `{written}`: {why}",
                    "warning",
                    origin.file,
                    origin.line,
                    1,
                    rid,
                    help="bound it at the release that has the change (`kernelpolicy knowledge stale` prints the "
                    "scanned releases)",
                    field=field_,
                )
