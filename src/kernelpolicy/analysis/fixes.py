"""Rules whose cited fix has shipped in a scanned release they do not bound (``kernelpolicy knowledge stale``).

A rule cites its fix in its ``because`` or ``help`` as ``fixed in <package> <version>`` (or
``fixed by <package> PR N (in <version>``): ``fixed in FlashInfer 0.6.16``, ``fixed in SGLang
0.5.17``. The fix is *in a scanned release* when a scanned engine release is that release or
later (vLLM, SGLang) or pins that release or a later one (FlashInfer, sgl-deep-gemm, humming:
``releases/*/releases.json``). The rule *bounds* the fix when, with the fixed release installed,
it no longer acts: its ``when`` fails, its ``until`` holds, or (a requirement) its requirement is
met. That is judged twice, each time three-valued with only the release's facts known: for the
package's version fact at the fixed release, and for every scanned engine release that brings
the fix, with what it pins and everything that implies (a rule bounded at ``vllm.version < 0.27`` bounds
a FlashInfer fix that vLLM 0.27 is the first to pin; a rule that tests one engine's release is
about that engine, and the other's releases are not asked). A rule that bounds neither way is listed:
its fix has shipped, yet it still acts on the releases that have it.

A rule may also name how its fix shows in released code (its ``fix``: a file of the package and
a signature). The scanned table of every published release of that package
(``releases/packages/contents.json``) then decides which releases *have* the fix, instead of
"that version or later", and :func:`contradicted_windows` lists each rule whose window the
released code contradicts: a release it treats as fixed whose code lacks the fix (a fix reverted
on a release branch, as FlashInfer 0.6.16.post3 did), a release whose code has the fix where the
rule still acts, or a release before the cited one that already has it.

Pure functions of a policy and the scanned data; the command is :mod:`kernelpolicy.cli._knowledge`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from packaging.version import Version

from ..dsl.conditions import TRUE, Condition, evaluate, tests_of
from ..facts.record import Facts
from ..policy import FixEvidence, Origin, Policy
from ..releases.packages import ReleaseContents, contents_of_any
from ..releases.sglang.versions import release_records as sglang_records
from ..releases.vllm.versions import release_records as vllm_records
from ..resolver import apply_implications

__all__ = [
    "CitedFix",
    "ContradictedWindow",
    "StaleBound",
    "cited_fixes",
    "contradicted_windows",
    "stale_bounds",
]

#: how rules name a package -> (the package as the scanned data names it, its version fact)
_PACKAGES: Final[Mapping[str, tuple[str, str]]] = {
    "vllm": ("vllm", "vllm.version"),
    "sglang": ("sglang", "sglang.version"),
    "flashinfer": ("flashinfer-python", "flashinfer.version"),
    "flashinfer-python": ("flashinfer-python", "flashinfer.version"),
    "sgl-deep-gemm": ("sgl-deep-gemm", "deep_gemm.version"),
    "humming": ("humming-kernels", "humming.version"),
    "humming-kernels": ("humming-kernels", "humming.version"),
}
_FIX: Final = re.compile(
    r"\bfixed (?:in|by) (?P<package>vLLM|SGLang|FlashInfer(?:-python)?|sgl-deep-gemm|humming(?:-kernels)?)\b"
    r"(?: PR \d+ \(in)? v?(?P<version>\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CitedFix:
    """A release a rule says fixed its incident."""

    package: str  #: as the scanned data names it (``flashinfer-python``)
    key: str  #: its version fact
    version: str  #: as written


@dataclass(frozen=True)
class StaleBound:
    """A rule whose cited fix is in a scanned release it does not bound."""

    rule: str
    origin: Origin
    fix: CitedFix
    #: the scanned engine releases that bring the fix (``vllm 0.27.0``), oldest first
    shipped_in: tuple[str, ...]

    def message(self) -> str:
        fix = f"{self.fix.package} {self.fix.version}"
        return (
            f"rule `{self.rule}` cites a fix in {fix}, which {', '.join(self.shipped_in)} bring, "
            f"yet still acts there: bound it (`{self.fix.key}` in `when` or `until`) or correct the citation"
        )


def cited_fixes(*texts: str | None) -> list[CitedFix]:
    """The fixes ``fixed in <package> <version>`` names in *texts*, in order, once each."""
    out: list[CitedFix] = []
    for text in texts:
        for m in _FIX.finditer(text or ""):
            package, key = _PACKAGES[m.group("package").lower()]
            fix = CitedFix(package, key, m.group("version"))
            if fix not in out:
                out.append(fix)
    return out


def _engine_releases() -> list[tuple[str, str, Mapping[str, str]]]:
    """``(engine, release, pins)`` of every scanned engine release, oldest first per engine."""
    out: list[tuple[str, str, Mapping[str, str]]] = []
    for engine, records in (("vllm", vllm_records()), ("sglang", sglang_records())):
        out += [(engine, v, r.get("requires", {})) for v, r in records.items()]
    return out


def _brings(
    engine: str, release: str, pins: Mapping[str, str], fix: CitedFix, seen: ReleaseContents | None = None
) -> bool:
    """Whether the scanned *engine* *release* has *fix* (is it, or pins it or a later one; with
    *seen*, the scanned contents of the fixed package, the pinned release's code decides)."""
    try:
        want = Version(fix.version)
        if fix.package == engine:
            return Version(release) >= want
        pinned = pins.get(fix.package)
        if pinned is not None and seen is not None and seen.shows(pinned) is not None:
            return seen.shows(pinned) is True
        return pinned is not None and Version(pinned) >= want
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return False


#: ``Requires-Dist`` name -> the fact an engine release's pin of it gives (SGLang's pins are data,
#: not implications; vLLM's are implied too, by rules/implies/vllm_releases.yaml)
_PIN_FACTS: Final[Mapping[str, str]] = {
    "flashinfer-python": "flashinfer.version",
    "sgl-deep-gemm": "deep_gemm.version",
    "humming-kernels": "humming.version",
    "torch": "torch.version",
}


def _engine_facts(engine: str, release: str, pins: Mapping[str, str]) -> dict[str, Any]:
    """The facts of a scanned engine release: the release and what it pins."""
    out: dict[str, Any] = {"deploy.engine": engine, f"{engine}.version": release}
    out |= {fact: pins[dist] for dist, fact in _PIN_FACTS.items() if dist in pins}
    if "sgl-deep-gemm" in pins:
        out["deep_gemm.dist"] = "sgl-deep-gemm"
    return out


def _acts(when: Condition, until: Condition | None, require: Condition | None, facts: Facts) -> bool:
    """Whether an entry may still act with *facts* (three-valued: unknown may act)."""
    typed = facts.typed()
    if evaluate(when, typed) is False:
        return False
    if until is not None and evaluate(until, typed) is True:
        return False
    return not (require is not None and evaluate(require, typed) is True)


def _entries(policy: Policy) -> Iterator[tuple[str, Origin, Condition, Condition | None, Condition | None, list[str]]]:
    for r in policy.rules:
        require = r.require if r.kind == "require" and r.require is not TRUE else None
        yield r.id, r.origin, r.when, r.until, require, [r.because, r.help or ""]
    for u in policy.unsupported:
        yield u.id, u.origin, u.when, None, None, [u.because, u.help or ""]


def _engines_of(*conds: Condition | None) -> set[str]:
    """The engines an entry concerns: one whose conditions test only vLLM's release (or only
    SGLang's) is about that engine; the others about both."""
    keys = {t.key for c in conds if c is not None for t in tests_of(c)}
    named = {e for e in ("vllm", "sglang") if f"{e}.version" in keys}
    return named if len(named) == 1 else {"vllm", "sglang"}


def stale_bounds(policy: Policy) -> list[StaleBound]:
    """Every rule (and ``unsupported`` entry) whose cited fix is in a scanned release it does not bound."""
    engines = _engine_releases()
    out: list[StaleBound] = []
    evidence = {r.id: r.fix for r in policy.rules if r.fix is not None}
    for rid, origin, when, until, require, texts in _entries(policy):
        for fix in cited_fixes(*texts):
            mine = _engines_of(when, until, require)
            ev = evidence.get(rid)
            seen = contents_of_any(ev) if ev is not None and ev[0].package == fix.package else None
            bringing = [(e, v, pins) for e, v, pins in engines if e in mine and _brings(e, v, pins, fix, seen)]
            if not bringing:
                continue  # the fix is in no scanned release: nothing to bound yet
            at_fix = apply_implications(Facts.from_values({fix.key: fix.version}, source="user"), policy)
            if seen is None and not _acts(when, until, require, at_fix):
                continue
            # bounded through the engine releases that bring it (each with what it implies)?
            still = [
                f"{e} {v}"
                for e, v, pins in bringing
                if _acts(
                    when,
                    until,
                    require,
                    apply_implications(Facts.from_values(_engine_facts(e, v, pins), source="user"), policy),
                )
            ]
            if still:
                out.append(StaleBound(rid, origin, fix, tuple(_ranges(still))))
    return out


def _ranges(releases: list[str]) -> list[str]:
    """``["vllm 0.27.1", "vllm 0.28.0", "sglang 0.5.23"]`` -> ``["vllm 0.27.1-0.28.0", "sglang 0.5.23"]``."""
    by: dict[str, list[str]] = {}
    for item in releases:
        engine, version = item.split(" ", 1)
        by.setdefault(engine, []).append(version)
    return [f"{e} {vs[0]}" if len(vs) == 1 else f"{e} {vs[0]}-{vs[-1]}" for e, vs in by.items()]


# -- windows checked against what shipped

#: what installing a package says beyond its version fact (a DeepGEMM version means another
#: build per distribution)
_DIST_FACTS: Final[Mapping[str, Mapping[str, str]]] = {"sgl-deep-gemm": {"deep_gemm.dist": "sgl-deep-gemm"}}


@dataclass(frozen=True)
class ContradictedWindow:
    """A rule whose window the scanned released code contradicts."""

    rule: str
    origin: Origin
    evidence: tuple[FixEvidence, ...]  #: the fix's alternatives (one package), any of which shows it
    fix: CitedFix | None  #: the cited fix the evidence is of (``None``: the rule cites none of that package)
    #: releases the rule treats as fixed whose code lacks the fix
    lacking: tuple[str, ...] = ()
    #: releases whose code has the fix where the rule still acts
    acting: tuple[str, ...] = ()
    #: releases before the cited fix whose code already has it
    early: tuple[str, ...] = ()
    #: the checked-in table has not scanned this evidence
    unscanned: bool = False

    @property
    def package(self) -> str:
        """The package the fix is in (every alternative's)."""
        return self.evidence[0].package

    def message(self) -> str:
        pkg = self.package
        if self.unscanned:
            files = " or ".join(f"`{f}`" for f in dict.fromkeys(e.file for e in self.evidence))
            return (
                f"rule `{self.rule}` names its fix in {files} of {pkg}, which the release table "
                "has not scanned: run `python -m kernelpolicy.releases.packages._scan`"
            )
        if self.fix is None:
            return f"rule `{self.rule}` names its fix in {pkg} but cites no fix in it (`fixed in {pkg} X`)"
        parts = []
        if self.lacking:
            parts.append(f"treats {_list(self.lacking)} as fixed, but their code lacks the fix")
        if self.acting:
            parts.append(f"still acts on {_list(self.acting)}, whose code has the fix")
        if self.early:
            parts.append(f"cites {pkg} {self.fix.version}, but {_list(self.early)} already have the fix")
        where = " or ".join(f"`{e.file}` ({e.kind} `{e.pattern}`)" for e in self.evidence)
        return f"rule `{self.rule}` {'; '.join(parts)} (the released {pkg} checked for {where})"


def _list(releases: tuple[str, ...]) -> str:
    return ", ".join(releases) if len(releases) <= 4 else f"{', '.join(releases[:3])} and {len(releases) - 3} more"


def contradicted_windows(policy: Policy) -> list[ContradictedWindow]:
    """Every rule with a ``fix`` whose window the scanned releases of its package contradict
    (or whose evidence the table has not scanned): each scanned release is judged with only its
    version fact known (and what that implies), three-valued (a rule that may act, acts)."""
    keys = dict(_PACKAGES.values())
    out: list[ContradictedWindow] = []
    for r in policy.rules:
        ev = r.fix
        if ev is None:
            continue
        fix = next((f for f in cited_fixes(r.because, r.help) if f.package == ev[0].package), None)
        seen = contents_of_any(ev)
        if seen is None:
            out.append(ContradictedWindow(r.id, r.origin, ev, fix, unscanned=True))
            continue
        if fix is None:
            out.append(ContradictedWindow(r.id, r.origin, ev, None))
            continue
        require = r.require if r.kind == "require" and r.require is not TRUE else None
        key = keys.get(ev[0].package, fix.key)
        lacking: list[str] = []
        acting: list[str] = []
        early: list[str] = []
        cited = Version(fix.version)
        for release in seen.releases:
            has = release in seen.has
            values = {key: release, **_DIST_FACTS.get(ev[0].package, {})}
            facts = apply_implications(Facts.from_values(values, source="user"), policy)
            acts = _acts(r.when, r.until, require, facts)
            if Version(release) < cited:
                if has:
                    early.append(release)
                continue
            if has and acts:
                acting.append(release)
            elif not has and not acts:
                lacking.append(release)
        if lacking or acting or early:
            out.append(ContradictedWindow(r.id, r.origin, ev, fix, tuple(lacking), tuple(acting), tuple(early)))
    return out
