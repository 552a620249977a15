"""Analysis of the rule tables: impossible, dead, shadowed, contradictory and stale rules.

Impossibility is read off a condition's decision diagram over the value classes of the keys
it reads (see :mod:`.domain` and :mod:`.compile`), so a specifier that no version satisfies, or
``gpu.sm: sm121`` with ``gpu.family: sm100``, is found exactly. Dead, shadowed and contradictory rules are read off
the exhaustive run (:mod:`.coverage`), which knows, for every cell, which rules reject a
candidate judged before the chosen one. A rule is stale when its
``until`` already holds for the newest release the implications know (:mod:`.releases`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Final

from packaging.version import Version

from ..dsl.conditions import TRUE, All, Condition, evaluate, tests_of
from ..policy import Policy, Rule
from .compile import Compiled
from .coverage import Coverage
from .domain import build_domain, rule_paths
from .findings import Finding
from .locate import Locator
from .releases import release_points

__all__ = ["analyse", "satisfiable", "stale"]


def satisfiable(cond: Condition, c: Compiled, *, lenient: bool = False) -> bool:
    """Whether some cell of the domain makes *cond* true, read off its diagram (one node per
    test on the classes a key reads, so a specifier no version satisfies, or two tests that
    exclude each other, are found exactly). With *lenient*, undecided counts too (how a crash
    rule reads its ``when``).

    :param c: the compiled domain; its condition diagrams are the proof's (each condition is
        compiled once).
    """
    values = c.m.terminals(c.cond(cond))
    return True in values or (lenient and None in values)


def _where(policy: Policy, owner: str) -> tuple[str, int]:
    r = policy.by_id.get(owner)
    if r is not None:
        return r.origin.file, r.origin.line
    for entries in policy.backends.values():
        for b in entries.values():
            if b.rule_id == owner:
                return b.origin.file, b.origin.line
    for orders in policy.orders.values():
        for o in orders:
            if o.id == owner:
                return o.origin.file, o.origin.line
    for imp in policy.implications:
        if imp.id == owner:
            return imp.origin.file, imp.origin.line
    return "", 0


def _impossible(policy: Policy, c: Compiled) -> Iterable[Finding]:
    items: list[tuple[str, str, Condition]] = []
    for r in policy.rules:
        items.append((r.id, "when", r.when))
        if r.kind == "require":
            items.append((r.id, "require", r.require))
    for entries in policy.backends.values():
        for b in entries.values():
            items.append((b.rule_id, "requires", b.requires))
    for orders in policy.orders.values():
        items += [(o.id, "when", o.when) for o in orders]
    items += [(imp.id, "when", imp.when) for imp in policy.implications]
    lenient = {r.id for r in policy.rules if r.severity == "crash" and r.kind in ("deny", "require")}
    for owner, part, cond in items:
        if cond is TRUE:
            continue
        # a test no value satisfies is a defect even where an unknown fact lets the rule apply
        dead_test = any(not satisfiable(t, c) for t in tests_of(cond))
        if not dead_test and satisfiable(cond, c, lenient=owner in lenient and part == "when"):
            continue
        file, line = _where(policy, owner)
        yield Finding(
            "impossible",
            f"`{part}` of `{owner}` holds for no facts: {_why(cond, c)}",
            "warning",
            file,
            line,
            1,
            owner,
            field=part,
            help="no GPU, model or version satisfies it, so the rule never applies; fix or remove it",
        )


def _why(cond: Condition, c: Compiled) -> str:
    """The smallest part of *cond* that is already unsatisfiable, in words."""
    tests = tests_of(cond)
    for t in tests:
        if not satisfiable(t, c):
            return f"{t.describe()} matches no value"
    for a, b in itertools.combinations(tests, 2):
        if not satisfiable(All((a, b)), c):
            return f"{a.describe()} and {b.describe()} exclude each other"
    return "its tests exclude each other"


#: Paths a deployment can pick a backend for explicitly (``--linear-backend``, ``--moe-backend``).
PICKABLE: Final = frozenset({"dense", "moe"})


def _reachability_matters(r: Rule, policy: Policy, impossible: set[str]) -> bool:
    if r.kind not in ("deny", "require") or r.layer == "user" or r.id in impossible:
        return False
    if r.paths and set(r.paths) <= {"warmup"}:
        return False
    # knowledge about a kernel also judges an explicit pick of it, whatever the order
    return not (r.layer == "shipped" and rule_paths(r, policy) & PICKABLE)


def _dead_and_shadowed(policy: Policy, cov: Coverage, impossible: set[str]) -> Iterable[Finding]:
    """Rules that never change a decision of the exhaustive run (``dead``), or never as the
    gravest reason (``shadowed``), read off the exact usage of every cell (:class:`~.coverage.Usage`).
    A shipped rule on a path a deployment can pick a backend for explicitly is left out: what is
    known about a kernel judges an explicit pick of it, which the default order may never reach
    (only ``impossible`` says such a rule is wrong)."""
    c = cov.compiled
    for r in policy.rules:
        if not _reachability_matters(r, policy, impossible) or (c is not None and not c.reads_usage(r)):
            continue  # (a rule below a layer proven on its base: its findings are the base's)
        file, line = r.origin.file, r.origin.line
        u = cov.usage.get(r.id)
        if u is None or not u.fires:
            yield Finding(
                "dead",
                f"rule `{r.id}` never changes a decision: wherever it applies, its backend is "
                "already rejected or a backend ahead of it is chosen",
                "warning",
                file,
                line,
                1,
                r.id,
                field=r.kind,
                help="it may guard a case the catalog already excludes; remove it or narrow the catalog",
            )
        elif not u.first:
            if u.by is not None:
                message = (
                    f"rule `{r.id}` is shadowed by `{u.by}`: wherever it rejects a backend, `{u.by}` "
                    "already decides first"
                )
            else:
                message = f"rule `{r.id}` is shadowed: wherever it rejects a backend, a graver rule decides first"
            yield Finding(
                "shadowed",
                message,
                "warning",
                file,
                line,
                1,
                r.id,
                field=r.kind,
                help="merge the two rules, or remove the one that never decides",
            )
        elif not u.sole:
            yield Finding(
                "dead",
                f"rule `{r.id}` never changes a decision: another rule always rejects the same backend with it",
                "warning",
                file,
                line,
                1,
                r.id,
                field=r.kind,
                help="remove it, or narrow the other rule",
            )


def _contradictions(policy: Policy, cov: Coverage) -> Iterable[Finding]:
    """``prefer`` rules of one layer that order one path differently where both are in force."""
    for a_id, b_id, path, label in cov.prefer_conflicts:
        a, b = policy.by_id[a_id], policy.by_id[b_id]
        yield Finding(
            "contradiction",
            f"rules `{a.id}` and `{b.id}` order the backends of path `{path}` differently for the same facts",
            "error",
            b.origin.file,
            b.origin.line,
            1,
            b.id,
            help=f"`{a.id}` is at {a.origin}; give one a narrower `when`",
            cell=label,
            field=b.kind,
        )


def _conflict(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    common = [x for x in a if x in b]
    return common != [x for x in b if x in a]


def stale(policy: Policy) -> Iterable[Finding]:
    """Rules whose ``until`` holds for every release the implications tell apart (of the
    releases where it is decided at all): the fix shipped before the oldest of them, so the rule
    acts on none. A rule whose fix came within the modelled releases still guards the older ones."""
    points = release_points(policy)
    if not points:
        return
    for r in policy.rules:
        if r.until is None:
            continue
        decided = [(key, version, typed) for key, version, typed in points if evaluate(r.until, typed) is not None]
        if not decided or any(evaluate(r.until, typed) is not True for _, _, typed in decided):
            continue
        spans: dict[str, list[Version]] = {}
        for key, version, _ in decided:
            spans.setdefault(key, []).append(version)
        named = ", ".join(f"`{k}` {min(v)}" + (f"-{max(v)}" if len(v) > 1 else "") for k, v in spans.items())
        oldest = decided[0][2]
        met = "; ".join(f"{t.describe()} (is `{oldest[t.key]}`)" for t in tests_of(r.until) if t.key in oldest)
        yield Finding(
            "stale-rule",
            f"rule `{r.id}` is stale: its `until` already holds for every release the catalog knows ({named}): {met}",
            "warning",
            r.origin.file,
            r.origin.line,
            1,
            r.id,
            help="the fix shipped before every modelled release; remove the rule once older releases no longer matter",
            field="until",
        )


def analyse(policy: Policy, cov: Coverage | None, locator: Locator | None = None) -> list[Finding]:
    """Every static finding about *policy*, given its exhaustive run *cov* (``None``: only
    the findings that need no run), each pointed at its field where *locator* knows it."""
    out = list(stale(policy))
    c = cov.compiled if cov is not None else None
    found = list(_impossible(policy, c if c is not None else Compiled(policy, build_domain(policy))))
    out += found
    if cov is not None:
        impossible = {f.rule for f in found if f.rule}
        out += _dead_and_shadowed(policy, cov, impossible)
        out += _contradictions(policy, cov)
    if locator is not None:
        out = [locator.locate(f, f.field) if f.field else f for f in out]
    return out
