"""The resolver's invariants, over whole random rule tables and over the shipped tables.

Each class states one invariant in its docstring. The checks compare the decision with an
independent restatement of the documented semantics (``strategies.rejections``), never with
the resolver's own helpers.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import kernelpolicy as kp
from kernelpolicy.decision import Decision
from kernelpolicy.dsl.conditions import TRUE, evaluate_tree, parse_condition
from kernelpolicy.facts import Facts
from kernelpolicy.policy import Origin, Policy, Rule
from kernelpolicy.resolver import DECIDED_PATHS

from .strategies import (
    OVERRIDABLE,
    SETTINGS,
    Table,
    applies,
    chosen,
    fresh,
    is_explicit,
    load_table,
    no_cache,
    pick_of,
    rejections,
    rule_dicts,
    shipped_facts,
    table_facts,
    tables,
)

pytestmark = pytest.mark.property

with no_cache():
    SHIPPED = kp.load_policy(environ=False)


@st.composite
def cases(draw: st.DrawFn, **kw: Any) -> tuple[Table, Facts]:
    table = draw(tables(**kw))
    return table, draw(table_facts(table))


def decide(facts: Facts, policy: Policy) -> Decision | None:
    """The decision, or None when explicit choices contradict each other (the one allowed error)."""
    try:
        return fresh(facts, policy)
    except kp.ContradictionError:
        assert is_explicit(facts, policy) or any(k.startswith("deploy.env.") for k in facts.values), (
            "ContradictionError without any explicit choice"
        )
        return None


def has_path(d: Decision, path: str) -> bool:
    if path == "attention" and not d.paths[path].applicable:
        return False  # a table without an attention catalog (issue #39): the path is absent
    return not (path in ("moe", "router") and d.facts.get("model.is_moe") is False)


# --------------------------------------------------------------------------- checks


def check_total(d: Decision, policy: Policy) -> None:
    for p in DECIDED_PATHS:
        pd = d.paths[p]
        if not has_path(d, p):
            assert pd.backend is None and pd.reason and not pd.applicable
            continue
        assert sorted(c.backend for c in pd.candidates) == sorted(policy.backends[p]), "every backend judged once"
        picked = [c.backend for c in pd.candidates if c.verdict == "chosen"]
        if pd.backend is None:
            assert pd.reason, f"path {p}: no backend and no reason"
            assert picked == []
        else:
            assert picked == [pd.backend]
            i = [c.backend for c in pd.candidates].index(pd.backend)
            assert all(c.verdict in ("rejected", "refused") for c in pd.candidates[:i])
        pick = pick_of(d, p, policy)
        for c in pd.candidates:
            reasons = rejections(c.backend, p, policy, d.facts, picked=pick is not None and pick[0] == c.backend)
            catalog = policy.backends[p][c.backend].rule_id
            if catalog in reasons:  # a backend that cannot run here is rejected for that alone
                reasons = {catalog: "catalog"}
            if c.verdict == "rejected":
                assert c.reason and set(c.rules) == set(reasons), (p, c, reasons)
            elif c.verdict == "viable":
                assert not reasons, (p, c, reasons)
            elif c.verdict == "refused":
                assert pick is not None and pick[0] == c.backend and c.reason
    assert d.ok == all(d.paths[p].backend is not None for p in DECIDED_PATHS if has_path(d, p))
    assert isinstance(d.paths["warmup"].kernels, tuple)


def _warmup_denied(b: str, policy: Policy, d: Decision, *, undecided: bool) -> bool:
    typed = d.facts.typed()
    for r in policy.rules:
        if r.kind == "deny" and r.paths and "warmup" in r.paths and b in r.backends:
            if r.until is not None and evaluate_tree(r.until, typed) is True:
                continue
            w = evaluate_tree(r.when, typed)
            if w is True or (undecided and w is None):
                return True
    return False


def check_cross_path(d: Decision, policy: Policy) -> None:
    typed = d.facts.typed()
    for r in policy.rules:
        if r.kind != "deny" or r.paths is not None or not applies(r, typed):
            continue
        for b in r.backends:
            for p in DECIDED_PATHS:
                if d.paths[p].backend == b:
                    c = chosen(d, p)
                    assert c is not None and d.paths[p].explicit and r.id in c.overridden, (
                        f"`{b}` chosen on `{p}` although `{r.id}` denies it on every path"
                    )
    warmed = d.warmup
    assert len(set(warmed)) == len(warmed)
    for k in warmed:
        b, p = k.rsplit(".", 1)
        assert d.paths[p].backend == b, f"warmup warms `{k}` but path `{p}` runs `{d.paths[p].backend}`"
        assert policy.backends[p][b].warmup
        assert not _warmup_denied(b, policy, d, undecided=False)
    for p in DECIDED_PATHS:
        b = d.paths[p].backend
        if b and policy.backends[p][b].warmup and not _warmup_denied(b, policy, d, undecided=True):
            assert f"{b}.{p}" in warmed, f"`{b}` runs on `{p}` and is JIT, yet is not warmed"


def check_sound(d: Decision, policy: Policy) -> None:
    for p in DECIDED_PATHS:
        b = d.paths[p].backend
        if b is None:
            continue
        c = chosen(d, p)
        assert c is not None
        pick = pick_of(d, p, policy)
        reasons = rejections(b, p, policy, d.facts, picked=pick is not None and pick[0] == b)
        if not reasons:
            assert not c.overridden
            continue
        assert pick is not None and pick[0] == b, f"`{b}` chosen on `{p}` despite {reasons} and no explicit choice"
        assert set(reasons) <= set(c.overridden) | {policy.backends[p][b].rule_id}
        for rid, sev in reasons.items():
            assert sev in OVERRIDABLE or rid in pick[1], f"`{rid}` ({sev}) overridden without being named"


def check_overrides(d: Decision, policy: Policy) -> None:
    for p in DECIDED_PATHS:
        if not has_path(d, p):
            continue
        pick = pick_of(d, p, policy)
        if pick is None:
            c = chosen(d, p)
            assert c is None or not c.overridden
            continue
        b, named = pick
        reasons = rejections(b, p, policy, d.facts, picked=True)
        blocking = {rid for rid, sev in reasons.items() if sev not in OVERRIDABLE and rid not in named}
        cand = next(c for c in d.paths[p].candidates if c.backend == b)
        if blocking:
            assert d.paths[p].backend != b and cand.verdict == "refused", (p, b, blocking)
            assert any(o.path == p and o.backend == b and not o.accepted for o in d.overrides)
        else:
            assert d.paths[p].backend == b, f"explicit `{b}` lost on `{p}` to {reasons}"
            if reasons:
                assert any(o.path == p and o.backend == b and o.accepted for o in d.overrides)
                assert all(any(f"`{rid}`" in w for w in d.warnings) for rid in set(reasons) & set(cand.overridden))


def check_all(d: Decision, policy: Policy) -> None:
    check_total(d, policy)
    check_cross_path(d, policy)
    check_sound(d, policy)
    check_overrides(d, policy)


# --------------------------------------------------------------------------- invariants


class TestTotality:
    """Totality: resolve never raises on valid facts (only a ContradictionError when explicit
    choices contradict each other); on every path the model has, it either chooses a backend
    or says why none is valid, and each rejected candidate carries its (real) reasons."""

    @SETTINGS
    @given(cases())
    def test_random_tables(self, case: tuple[Table, Facts]) -> None:
        table, facts = case
        policy = load_table(table)
        d = decide(facts, policy)
        if d is not None:
            check_total(d, policy)

    @SETTINGS
    @given(shipped_facts(SHIPPED))
    def test_shipped_tables(self, facts: Facts) -> None:
        d = decide(facts, SHIPPED)
        if d is not None:
            check_total(d, SHIPPED)
            d.to_json()  # the JSON contract serialises every decision


class TestCrossPathConsistency:
    """Cross-path consistency: a backend denied by an applicable deny without `paths` is chosen
    on no path (unless an explicit choice overrides that very rule there); warmup only warms
    JIT backends that a path chose, and warms every one no warmup-scoped deny stops."""

    @SETTINGS
    @given(cases())
    def test_random_tables(self, case: tuple[Table, Facts]) -> None:
        table, facts = case
        policy = load_table(table)
        d = decide(facts, policy)
        if d is not None:
            check_cross_path(d, policy)

    @SETTINGS
    @given(shipped_facts(SHIPPED))
    def test_shipped_tables(self, facts: Facts) -> None:
        d = decide(facts, SHIPPED)
        if d is not None:
            check_cross_path(d, SHIPPED)


class TestRequirementSoundness:
    """Requirement soundness: a chosen backend's catalog requirement is not false for the facts,
    and no applicable deny (or unmet require) names it, unless an explicit choice overrode
    exactly those rules (and named each crash rule and catalog requirement)."""

    @SETTINGS
    @given(cases())
    def test_random_tables(self, case: tuple[Table, Facts]) -> None:
        table, facts = case
        policy = load_table(table)
        d = decide(facts, policy)
        if d is not None:
            check_sound(d, policy)

    @SETTINGS
    @given(shipped_facts(SHIPPED))
    def test_shipped_tables(self, facts: Facts) -> None:
        d = decide(facts, SHIPPED)
        if d is not None:
            check_sound(d, SHIPPED)


def _outcome(d: Decision | None) -> Any:
    if d is None:
        return "contradiction"
    return (
        {p: d.paths[p].backend for p in DECIDED_PATHS},
        sorted(d.warmup),
        {
            p: sorted((c.backend, c.verdict, tuple(sorted(c.rules))) for c in d.paths[p].candidates)
            for p in DECIDED_PATHS
        },
    )


def _one_prefer_per_path(table: Table) -> Table:
    """Drop all but the first `prefer` rule of each path (see test_competing_prefers_depend_on_order)."""
    seen: set[str] = set()
    rules = []
    for r in table.rules:
        if "prefer" in r:
            if r["paths"][0] in seen:
                continue
            seen.add(r["paths"][0])
        rules.append(r)
    return dataclasses.replace(table, rules=rules)


class TestDeterminism:
    """Determinism and independence from rule-file and rule order: the same facts and policy
    give an equal decision and fingerprint (cached or not, reloaded or not), and shuffling the
    rules and the order of the rule files changes no path's outcome."""

    @SETTINGS
    @given(cases(), st.randoms(use_true_random=False))
    def test_random_tables(self, case: tuple[Table, Facts], rnd: Any) -> None:
        table, facts = case
        table = _one_prefer_per_path(table)
        policy = load_table(table)
        try:
            d1 = fresh(facts, policy)
        except kp.ContradictionError:
            d1 = None
        if d1 is not None:
            assert fresh(facts, policy).to_dict() == d1.to_dict()
            assert kp.resolve(facts, policy).to_dict() == d1.to_dict()
            again = load_table(table)
            assert again.digest == policy.digest
            assert fresh(facts, again).fingerprint == d1.fingerprint
        rules = list(table.rules)
        rnd.shuffle(rules)
        use = list(table.policy)
        rnd.shuffle(use)
        order = list(range(table.rule_files))
        rnd.shuffle(order)
        shuffled = load_table(dataclasses.replace(table, rules=rules, policy=use), file_order=order)
        try:
            d2 = fresh(facts, shuffled)
        except kp.ContradictionError:
            d2 = None
        assert _outcome(d2) == _outcome(d1)

    @SETTINGS
    @given(shipped_facts(SHIPPED), st.randoms(use_true_random=False))
    def test_shipped_tables(self, facts: Facts, rnd: Any) -> None:
        d1 = decide(facts, SHIPPED)
        if d1 is not None:
            assert fresh(facts, SHIPPED).to_dict() == d1.to_dict()
            assert kp.resolve(facts, SHIPPED).fingerprint == d1.fingerprint
        rules = list(SHIPPED.rules)
        rnd.shuffle(rules)
        shuffled = dataclasses.replace(SHIPPED, rules=tuple(rules))
        assert _outcome(decide(facts, shuffled)) == _outcome(d1)

    def test_competing_prefers_do_not_depend_on_order(self) -> None:
        """Regression: two applicable `prefer` rules of one layer once let the later one win."""
        catalog = {"backends": [{"backend": "cutlass", "paths": ["dense"]}, {"backend": "triton", "paths": ["dense"]}]}
        catalog["engine"] = {"name": "vllm", "env": []}
        rules = [
            {"id": "a", "prefer": ["cutlass"], "paths": ["dense"], "because": "a"},
            {"id": "b", "prefer": ["triton"], "paths": ["dense"], "because": "b"},
        ]
        facts = Facts.from_values({})
        one = fresh(facts, load_table(Table(catalog, rules)))
        two = fresh(facts, load_table(Table(catalog, rules[::-1])))
        assert one.paths["dense"].backend == two.paths["dense"].backend


def _without(table: Table, b: str) -> Table:
    """*table* with backend *b* removed from the catalog, and every reference to it dropped."""
    cat = copy.deepcopy(table.catalog)
    cat["backends"] = [e for e in cat["backends"] if e["backend"] != b]
    orders = []
    for o in cat.get("order", []):
        o["backends"] = [x for x in o["backends"] if x != b]
        if o["backends"]:
            orders.append(o)
    cat["order"] = orders
    cat["engine"]["env"] = [e for e in cat["engine"]["env"] if b not in (e.get("deny"), e.get("use"))]
    rules = []
    for r in copy.deepcopy(table.rules):
        if b in (r.get("deny"), r.get("backend")):
            continue
        if "prefer" in r:
            r["prefer"] = [x for x in r["prefer"] if x != b]
            if not r["prefer"]:
                continue
        rules.append(r)
    ids = {r["id"] for r in rules}
    use = []
    for r in copy.deepcopy(table.policy):
        if r["use"] == b:
            continue
        r["overrides"] = [
            o for o in r.get("overrides", []) if o in ids or (o.startswith("catalog.") and not o.endswith(f".{b}"))
        ]
        use.append(r)
    return dataclasses.replace(table, catalog=cat, rules=rules, policy=use)


def _extra_deny(draw: st.DrawFn, policy: Policy) -> Rule:
    where = [(p, b) for p in DECIDED_PATHS for b in policy.backends[p]]
    p, b = draw(st.sampled_from(where))
    scope = draw(st.sampled_from([None, (p,)]))
    when = draw(
        st.sampled_from(
            [TRUE, parse_condition({"gpu.family": ["sm100", "sm120"]}), parse_condition({"quant.scheme": "fp8_block"})]
        )
    )
    return Rule(
        id="extra-deny",
        kind="deny",
        when=when,
        backends=(b,),
        paths=scope,
        severity=draw(st.sampled_from(("crash", "accuracy", "perf", "support"))),
        because="an extra deny",
        origin=Origin("extra.yaml", 1, "shipped"),
        refs=("x#1",),
    )


def check_monotone(before: Decision | None, after: Decision | None) -> None:
    assert (before is None) == (after is None), "adding a shipped deny made or unmade a contradiction"
    if before is None or after is None:
        return
    for p in DECIDED_PATHS:
        verdicts = {c.backend: c.verdict for c in after.paths[p].candidates}
        for c in before.paths[p].candidates:
            if c.verdict in ("rejected", "refused"):
                assert verdicts[c.backend] in ("rejected", "refused"), f"`{c.backend}` came back on `{p}`"
        b = before.paths[p].backend
        if b is not None and verdicts[b] not in ("rejected", "refused"):
            assert after.paths[p].backend == b, f"`{p}` moved off `{b}` though the new deny spares it"


class TestMonotonicity:
    """Monotonicity: adding a deny never brings a denied backend back (and a path whose choice the
    new deny spares keeps it); removing a backend from the catalog never changes the paths that
    did not choose it."""

    @SETTINGS
    @given(st.data())
    def test_adding_a_deny_random(self, data: st.DataObject) -> None:
        table, facts = data.draw(cases())
        extra = data.draw(rule_dicts(table.catalog, "extra-deny", kinds=("deny",)))
        more = dataclasses.replace(table, rules=[*table.rules, extra])
        check_monotone(decide(facts, load_table(table)), decide(facts, load_table(more)))

    @SETTINGS
    @given(shipped_facts(SHIPPED), st.data())
    def test_adding_a_deny_shipped(self, facts: Facts, data: st.DataObject) -> None:
        rule = _extra_deny(data.draw, SHIPPED)
        more = dataclasses.replace(SHIPPED, rules=(*SHIPPED.rules, rule), by_id={**SHIPPED.by_id, rule.id: rule})
        check_monotone(decide(facts, SHIPPED), decide(facts, more))

    @SETTINGS
    @given(st.data())
    def test_removing_a_backend_random(self, data: st.DataObject) -> None:
        table, facts = data.draw(cases())
        b = data.draw(st.sampled_from(sorted({e["backend"] for e in table.catalog["backends"]})))
        # the user's own input stays the same: no explicit choice of the removed backend
        assume(b not in (facts.get("deploy.moe_backend"), facts.get("deploy.linear_backend")))
        assume(all(e.get("use") != b for e in table.catalog["engine"]["env"]))
        assume(all(r["use"] != b for r in table.policy))
        before = decide(facts, load_table(table))
        after = decide(facts, load_table(_without(table, b)))
        if before is None:
            return
        assert after is not None
        for p in DECIDED_PATHS:
            if before.paths[p].backend != b:
                assert after.paths[p].backend == before.paths[p].backend, f"removing `{b}` changed `{p}`"


class TestOverrideSemantics:
    """Override semantics: an explicit choice (flag, env, policy `use`) beats accuracy, perf and
    support rules on every path it names alike, and is refused by a crash rule or an unmet
    catalog requirement unless the choice names that rule's id; refusals and overrides are
    reported."""

    @SETTINGS
    @given(cases())
    def test_random_tables(self, case: tuple[Table, Facts]) -> None:
        table, facts = case
        policy = load_table(table)
        d = decide(facts, policy)
        if d is not None:
            check_overrides(d, policy)

    @SETTINGS
    @given(shipped_facts(SHIPPED))
    def test_shipped_tables(self, facts: Facts) -> None:
        d = decide(facts, SHIPPED)
        if d is not None:
            check_overrides(d, SHIPPED)

    def test_naming_the_catalog_bypasses_crash_rules(self) -> None:
        """Regression: a failed catalog requirement once hid every other rule from an override."""
        catalog = {
            "backends": [
                {"backend": "marlin", "paths": ["dense"], "requires": {"gpu.family": "sm90"}},
                {"backend": "triton", "paths": ["dense", "moe"]},
                {"backend": "linear", "paths": ["router"]},
            ],
            "engine": {"name": "vllm", "env": []},
        }
        rules = [{"id": "marlin-crash", "deny": "marlin", "refs": ["x#1"], "severity": "crash", "because": "crashes"}]
        facts = {
            "gpu.family": "sm100",
            "deploy.linear_backend": "marlin",
            "deploy.allow_rules": ["catalog.dense.marlin"],
        }
        d = fresh(Facts.from_values(facts), load_table(Table(catalog, rules)))
        # the override names the catalog requirement only: the crash rule must still refuse it
        assert d.paths["dense"].backend != "marlin"

    @SETTINGS
    @given(cases())
    def test_all_checks_together(self, case: tuple[Table, Facts]) -> None:
        """Every invariant on one decision (cheap once the table is loaded)."""
        table, facts = case
        policy = load_table(table)
        d = decide(facts, policy)
        if d is not None:
            check_all(d, policy)
