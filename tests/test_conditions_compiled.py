"""The compiled evaluator agrees with the reference tree walker on every shipped condition."""

from __future__ import annotations

import itertools

import kernelpolicy as kp
from kernelpolicy.dsl.conditions import evaluate, evaluate_tree
from kernelpolicy.dsl.conditions import tests_of as leaves
from kernelpolicy.facts import Facts


def test_compiled_matches_reference(policy: kp.Policy) -> None:
    conds = [r.when for r in policy.rules] + [r.require for r in policy.rules]
    conds += [b.requires for entries in policy.backends.values() for b in entries.values()]
    conds += [i.when for i in policy.implications]
    # every value any test mentions, per key, plus "unknown"
    values: dict[str, list[object]] = {}
    for c in conds:
        for t in leaves(c):
            ops = t.operand if t.op == "in" else [t.operand]
            values.setdefault(t.key, [])
            for o in ops if not isinstance(ops, str) else [ops]:
                if t.op in ("eq", "in") and not hasattr(o, "contains"):
                    values[t.key].append(o)
    checked = 0
    for c in conds:
        keys = sorted({t.key for t in leaves(c)})[:4]
        domains = [[None, *values.get(k, [])[:3]] for k in keys]
        for combo in itertools.product(*domains):
            raw = {k: v for k, v in zip(keys, combo, strict=True) if v is not None}
            try:
                typed = Facts.from_values(raw).typed()
            except kp.FactError:
                continue
            assert evaluate(c, typed) == evaluate_tree(c, typed), (c, raw)
            checked += 1
    assert checked > 500
