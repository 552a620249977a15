"""Shared hypothesis settings, strategies and oracles for the property suites.

Two sources of policies:

- :func:`tables`: whole random rule tables (a catalog over a few backends per path, random
  ``requires``, random ``deny``/``require``/``prefer`` rules with random severities, path scopes,
  ``until`` and conditions over a few keys, policy-layer ``use`` rules and engine env entries),
  serialised to YAML and loaded with the real loader (:func:`load_table`);
- the shipped tables (``kernelpolicy.load_policy(environ=False)``) with :func:`shipped_facts`,
  facts drawn from the values the shipped conditions compare with.

The oracles (:func:`rejections`, :func:`applies`) restate the documented semantics with the
reference evaluator (:func:`~kernelpolicy.dsl.conditions.evaluate_tree`), independently of the
resolver's code, so the invariants do not check the resolver against itself.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import kernelpolicy as kp
from kernelpolicy.decision import Candidate, Decision
from kernelpolicy.dsl.conditions import evaluate_tree, tests_of
from kernelpolicy.dsl.loader import SourceFile, load_files
from kernelpolicy.facts import Facts
from kernelpolicy.facts.keys import CANONICAL, FACT_KEYS, Kind, lookup_key
from kernelpolicy.facts.record import _INT_MIN
from kernelpolicy.policy import Policy, Rule
from kernelpolicy.reporters import BaseReporter
from kernelpolicy.resolver import DECIDED_PATHS

#: Bounded for CI: the whole property suite runs in well under a minute on 2 cores.
#: ``KERNELPOLICY_PROPERTY_EXAMPLES`` raises it for a longer local hunt.
MAX_EXAMPLES = int(os.environ.get("KERNELPOLICY_PROPERTY_EXAMPLES", "50"))
SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize=os.environ.get("KERNELPOLICY_PROPERTY_RANDOM", "") in ("", "0"),
    database=None,
    # a planted-bug run wants the verdict, not the smallest example: skip the (slow) shrinking
    phases=[Phase.explicit, Phase.generate] if os.environ.get("KERNELPOLICY_PLANT_BUG") else list(Phase),
)
#: For the loader fuzz: cheap examples, so more of them.
FUZZ_SETTINGS = settings(SETTINGS, max_examples=MAX_EXAMPLES * 2)

#: Explicit choices may name a catalog requirement (``catalog.<path>.<id>``) among the rules
#: they override (this once hid every other rule from the override; see
#: test_naming_the_catalog_bypasses_crash_rules). ``KERNELPOLICY_PROPERTY_NAME_CATALOG=0``
#: leaves such choices out.
NAME_CATALOG = os.environ.get("KERNELPOLICY_PROPERTY_NAME_CATALOG", "1") == "1"
OVERRIDABLE = frozenset({"accuracy", "perf", "support"})
SEVERITIES = ("crash", "accuracy", "perf", "support")

# --------------------------------------------------------------------------- random tables

#: Backend ids the random catalogs use, per path (all valid ids of that path).
POOL: dict[str, tuple[str, ...]] = {
    "dense": ("deep_gemm", "cutlass", "triton", "marlin"),
    "moe": ("deep_gemm", "triton", "marlin", "vllm_cutlass"),
    "router": ("linear", "cublas", "fp32_gemv"),
}
JIT = frozenset({"deep_gemm"})
#: The paths the random catalogs fill (attention, issue #39, is left without a catalog: the
#: resolver and the proof both leave such a path absent, which the tables check too).
_PATHS = tuple(p for p in DECIDED_PATHS if p in POOL)

#: The few fact keys random conditions read, with the values facts take and rules compare to.
KEY_VALUES: dict[str, tuple[Any, ...]] = {
    "gpu.family": ("sm90", "sm100", "sm120"),
    "quant.scheme": ("fp8_block", "fp8_tensor", "nvfp4"),
    "host.machine": ("x86_64", "aarch64"),
    "deep_gemm.has_sm120_sf_layout": (True, False),
    "model.hidden_size": (2048, 4096, 7168),
    "triton.version": ("3.3.0", "3.5.1", "3.6.0"),
}
SPECS = (">=3.4", "<3.6", ">=3.3,<3.6", "==3.5.1", "!=3.6.0")
CMPS = (">= 4096", "< 4096", "== 7168", "!= 2048")
ENV_NAMES = ("KP_A", "KP_B")


def _leaf_value(key: str) -> st.SearchStrategy[Any]:
    values = KEY_VALUES[key]
    if isinstance(values[0], bool):
        return st.sampled_from(values)
    options: list[st.SearchStrategy[Any]] = [
        st.sampled_from(values),
        st.lists(st.sampled_from(values), min_size=1, max_size=len(values), unique=True),
    ]
    if key == "triton.version":
        options.append(st.sampled_from(SPECS))
    if key == "model.hidden_size":
        options.append(st.sampled_from(CMPS))
    return st.one_of(options)


@st.composite
def _leaf(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(sorted(KEY_VALUES)), min_size=1, max_size=2, unique=True))
    return {k: draw(_leaf_value(k)) for k in keys}


def conditions() -> st.SearchStrategy[dict[str, Any]]:
    """A condition in its YAML form: tests over a few keys, combined with all/any/not."""
    return st.recursive(
        _leaf(),
        lambda kids: st.one_of(
            st.lists(kids, min_size=1, max_size=3).map(lambda xs: {"all": xs}),
            st.lists(kids, min_size=1, max_size=3).map(lambda xs: {"any": xs}),
            kids.map(lambda x: {"not": x}),
        ),
        max_leaves=4,
    )


@dataclass
class Table:
    """A random rule table, as plain data, ready to be written as YAML files."""

    catalog: dict[str, Any]  #: backends, order, engine
    rules: list[dict[str, Any]]  #: shipped-layer rules (deny, require, prefer)
    policy: list[dict[str, Any]] = field(default_factory=list)  #: policy-layer `use` rules
    rule_files: int = 1  #: how many files the shipped rules are split across

    def where(self, backend: str) -> list[str]:
        """The paths *backend* exists on in this catalog."""
        return [p for e in self.catalog["backends"] if e["backend"] == backend for p in e["paths"]]

    def ids(self) -> list[str]:
        return [r["id"] for r in self.rules] + [r["id"] for r in self.policy]


@st.composite
def _catalog(draw: st.DrawFn) -> dict[str, Any]:
    ids = sorted({b for bs in POOL.values() for b in bs})
    entries: list[dict[str, Any]] = []
    for b in ids:
        paths = [p for p in _PATHS if b in POOL[p] and draw(st.booleans())]
        if not paths:
            continue
        entry: dict[str, Any] = {"backend": b, "paths": paths}
        if draw(st.booleans()):
            entry["requires"] = draw(conditions())
        if b in JIT:
            entry["warmup"] = draw(st.booleans())
        if not draw(st.integers(0, 5)):
            entry["auto"] = False
        entries.append(entry)
    for p in _PATHS:  # an empty path reads as "not applicable" (see the report); keep one
        if not any(p in e["paths"] for e in entries):
            entries.append({"backend": POOL[p][-1], "paths": [p]})
    entries = draw(st.permutations(entries))  # catalog order is the default priority
    catalog: dict[str, Any] = {"backends": entries}
    orders = []
    for p in DECIDED_PATHS:
        mine = [e["backend"] for e in entries if p in e["paths"]]
        if mine and draw(st.booleans()):
            order: dict[str, Any] = {"id": f"order-{p}", "path": p, "backends": draw(st.permutations(mine))}
            if draw(st.booleans()):
                order["when"] = draw(conditions())
            orders.append(order)
    if orders:
        catalog["order"] = orders
    env = []
    for name in ENV_NAMES:
        for value in ("0", "1"):
            if not draw(st.booleans()):
                continue
            b = draw(st.sampled_from([e["backend"] for e in entries]))
            where = [p for e in entries if e["backend"] == b for p in e["paths"]]
            item: dict[str, Any] = {"name": name, "value": value, ("deny" if value == "0" else "use"): b}
            if draw(st.booleans()):
                item["paths"] = draw(st.lists(st.sampled_from(where), min_size=1, unique=True))
            item["because"] = f"the deployment sets {name}={value}"
            env.append(item)
    catalog["engine"] = {"name": "vllm", "env": env}
    return catalog


def _scope(draw: st.DrawFn, where: list[str], warmup_ok: bool) -> list[str] | None:
    """None (every path) or a non-empty subset of *where*."""
    options = list(where) + (["warmup"] if warmup_ok else [])
    if not options or draw(st.booleans()):
        return None
    return draw(st.lists(st.sampled_from(options), min_size=1, unique=True))


@st.composite
def rule_dicts(
    draw: st.DrawFn, catalog: dict[str, Any], rid: str, kinds: Sequence[str] = ("deny", "require", "prefer")
) -> dict[str, Any] | None:
    """One random shipped-layer rule about *catalog*'s backends (None when none fits)."""
    entries = catalog["backends"]
    kind = draw(st.sampled_from(kinds))
    rule: dict[str, Any] = {"id": rid}
    if draw(st.integers(0, 3)):
        rule["when"] = draw(conditions())
    if kind == "prefer":
        paths = [p for p in DECIDED_PATHS if any(p in e["paths"] for e in entries)]
        if not paths:
            return None
        p = draw(st.sampled_from(paths))
        mine = [e["backend"] for e in entries if p in e["paths"]]
        rule["prefer"] = draw(st.lists(st.sampled_from(mine), min_size=1, unique=True))
        rule["paths"] = [p]
    else:
        entry = draw(st.sampled_from(entries))
        b = entry["backend"]
        scope = _scope(draw, entry["paths"], bool(entry.get("warmup")) and kind == "deny")
        if kind == "deny":
            rule["deny"] = b
            rule["refs"] = ["x#1"]
        else:
            rule["backend"] = b
            rule["require"] = draw(conditions())
        if scope is not None:
            rule["paths"] = scope
        rule["severity"] = draw(st.sampled_from(SEVERITIES))
        if draw(st.integers(0, 4)) == 0:
            rule["until"] = draw(conditions())
    rule["because"] = f"random rule {rid}"
    return rule


@st.composite
def tables(draw: st.DrawFn, *, policy_use: bool = True) -> Table:
    """A whole random rule table (catalog, rules, policy `use` rules)."""
    catalog = draw(_catalog())
    rules = []
    for i in range(draw(st.integers(0, 6))):
        r = draw(rule_dicts(catalog, f"r{i}"))
        if r is not None:
            rules.append(r)
    policy = []
    if policy_use:
        crash = [r["id"] for r in rules if r.get("severity") == "crash"]
        for i in range(draw(st.integers(0, 2))):
            entry = draw(st.sampled_from(catalog["backends"]))
            b = entry["backend"]
            use: dict[str, Any] = {"id": f"use{i}", "use": b, "because": "operator choice"}
            if draw(st.booleans()):
                use["paths"] = [draw(st.sampled_from(entry["paths"]))]
            named = [f"catalog.{p}.{b}" for p in entry["paths"] if NAME_CATALOG] + crash
            overrides = draw(st.lists(st.sampled_from(named), max_size=2, unique=True)) if named else []
            if overrides:
                use["overrides"] = overrides
            if draw(st.booleans()):
                use["when"] = draw(conditions())
            policy.append(use)
    return Table(catalog, rules, policy, rule_files=draw(st.integers(1, 3)))


@st.composite
def table_facts(draw: st.DrawFn, table: Table) -> Facts:
    """Facts for a random table: each key known or unknown, plus random explicit choices."""
    values: dict[str, Any] = {}
    for key, options in KEY_VALUES.items():
        if draw(st.integers(0, 3)):  # unknown (absent) a quarter of the time
            values[key] = draw(st.sampled_from(options))
    values["model.is_moe"] = draw(st.sampled_from([True, True, True, False, None]))
    for name in ENV_NAMES:
        values[f"deploy.env.{name}"] = draw(st.sampled_from([None, None, "0", "1"]))
    if not draw(st.integers(0, 3)):
        values["deploy.moe_backend"] = draw(st.sampled_from(POOL["moe"]))
    if not draw(st.integers(0, 3)):
        values["deploy.linear_backend"] = draw(st.sampled_from(POOL["dense"]))
    named = [r["id"] for r in table.rules if r.get("severity") == "crash"]
    if NAME_CATALOG:
        named += [f"catalog.{p}.{e['backend']}" for e in table.catalog["backends"] for p in e["paths"]]
    allow = draw(st.lists(st.sampled_from(named), max_size=2, unique=True)) if named else []
    if allow:
        values["deploy.allow_rules"] = tuple(allow)
    return Facts.from_values(values)


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def write_table(table: Table, root: Path, *, file_order: Sequence[int] | None = None) -> list[SourceFile]:
    """Write *table* as YAML files under *root*: the catalog, then the rules split over files."""
    root.mkdir(parents=True, exist_ok=True)
    cat = root / "catalog.yaml"
    cat.write_text(_dump(table.catalog))
    files = [SourceFile(cat, "rules/catalog.yaml", "shipped")]
    n = max(1, table.rule_files)
    chunks = [table.rules[i::n] for i in range(n)]
    for i in file_order if file_order is not None else range(n):
        p = root / f"rules{i}.yaml"
        p.write_text(_dump({"rules": chunks[i]}))
        files.append(SourceFile(p, f"rules/rules{i}.yaml", "shipped"))
    if table.policy:
        p = root / "policy.yaml"
        p.write_text(_dump({"rules": table.policy}))
        files.append(SourceFile(p, "policy/policy.yaml", "policy"))
    return files


def load_table(table: Table, *, file_order: Sequence[int] | None = None) -> Policy:
    """Load *table* with the real loader (cache off: see the conftest)."""
    with tempfile.TemporaryDirectory(prefix="kp-prop-") as tmp:
        return load_files(write_table(table, Path(tmp), file_order=file_order))


# --------------------------------------------------------------------------- shipped tables


def _operands(policy: Policy) -> dict[str, list[Any]]:
    """For each fact key a shipped condition reads, the values it compares with."""
    conds = [e.requires for es in policy.backends.values() for e in es.values()]
    conds += [c for r in policy.rules for c in (r.when, r.require, r.until) if c is not None]
    conds += [c for i in policy.implications for c in (i.when, i.unless) if c is not None]
    conds += [o.when for os_ in policy.orders.values() for o in os_]
    out: dict[str, list[Any]] = {}
    for c in conds:
        for t in tests_of(c):
            vals = out.setdefault(t.key, [])
            ops: list[Any] = []
            if t.op in ("in", "has"):
                ops = sorted(t.operand, key=str)
            elif t.op == "cmp":
                ops = [t.operand[1], t.operand[1] + 1, t.operand[1] - 1]
            else:
                ops = [t.operand]
            for o in ops:
                if isinstance(o, SpecifierSet):
                    for s in o:
                        v = Version(s.version.replace(".*", ""))
                        vals += [str(v), f"{v.major}.{v.minor}.{v.micro + 1}", f"{v.major}.{max(v.minor - 1, 0)}.0"]
                elif isinstance(o, Version):
                    vals.append(str(o))
                elif o not in vals:
                    vals.append(o)
    return out


def _values_for(key: str, seen: list[Any]) -> st.SearchStrategy[Any]:
    fk = lookup_key(key)
    assert fk is not None
    if fk.kind is Kind.ENUM:
        return st.sampled_from(fk.domain)
    if fk.kind is Kind.BOOL:
        return st.booleans()
    if fk.kind is Kind.INT:
        least = _INT_MIN.get(key, 1)  # a bound's neighbour below the key's range is no fact (`deploy.dcp > 1`: 0)
        return st.sampled_from(sorted({*(v for v in seen if isinstance(v, int) and v >= least), 1, 2048, 7168}))
    if fk.kind is Kind.INT_LIST:
        return st.sampled_from([(128, 128), (1, 128), (64, 64)])
    if fk.kind is Kind.STR_LIST:
        pool = sorted({*(str(v) for v in seen), "sm_90", "sm_120"})
        return st.lists(st.sampled_from(pool), max_size=3, unique=True).map(tuple)
    if fk.kind is Kind.VERSION:
        return st.sampled_from(sorted({str(v) for v in seen} | {"0.1.0"}, key=Version))
    canonical = CANONICAL.get(key)
    spare = canonical.spare(frozenset(str(v) for v in seen)) if canonical else "other"  # a valid unnamed value
    return st.sampled_from(sorted({*(str(v) for v in seen), spare}))


def shipped_facts(policy: Policy, *, explicit: bool = True) -> st.SearchStrategy[Facts]:
    """Facts for the shipped tables: every key they read (plus a few more) known or unknown."""
    operands = _operands(policy)
    keys = sorted(
        set(operands)
        | {"gpu.sm", "gpu.family", "model.is_moe", "quant.scheme", "quant.moe_scheme", "model.activation"}
        | {"model.router_dtype", "quant.scale_fmt", "gpu.has_tcgen05", "vllm.version", "deep_gemm.source"}
    )
    keys = [k for k in keys if not k.startswith("deploy.env.")]
    env = sorted(k for k in operands if k.startswith("deploy.env."))

    @st.composite
    def build(draw: st.DrawFn) -> Facts:
        values: dict[str, Any] = {}
        for k in keys:
            if draw(st.integers(0, 2)):
                values[k] = draw(_values_for(k, operands.get(k, [])))
        if explicit:
            for k in env:
                if not draw(st.integers(0, 4)):
                    values[k] = draw(st.sampled_from(sorted({str(v) for v in operands[k]})))
            if not draw(st.integers(0, 3)):
                values["deploy.moe_backend"] = draw(st.sampled_from(sorted(policy.backends["moe"])))
            if not draw(st.integers(0, 4)):
                values["deploy.linear_backend"] = draw(st.sampled_from(sorted(policy.backends["dense"])))
            crash = sorted(r.id for r in policy.rules if r.severity == "crash")
            if crash and not draw(st.integers(0, 3)):
                values["deploy.allow_rules"] = tuple(draw(st.lists(st.sampled_from(crash), max_size=2, unique=True)))
        return Facts.from_values(values)

    return build()


# --------------------------------------------------------------------------- oracles


def fresh(facts: Facts, policy: Policy) -> Decision:
    """Resolve without the resolver's decision cache."""
    return kp.resolve(facts, policy, BaseReporter())


def is_explicit(facts: Facts, policy: Policy) -> bool:
    """Whether *facts* (or *policy*) carry an explicit backend choice."""
    if facts.get("deploy.moe_backend") is not None or facts.get("deploy.linear_backend") is not None:
        return True
    return any(r.kind == "use" for r in policy.rules)


def applies(rule: Rule, typed: Mapping[str, Any]) -> bool:
    """The documented meaning of a rule's ``when``/``until``: unknown applies only for crash."""
    if rule.until is not None and evaluate_tree(rule.until, typed) is True:
        return False
    w = evaluate_tree(rule.when, typed)
    return w is True or (w is None and rule.severity == "crash")


def targets(rule: Rule, backend: str, path: str, policy: Policy) -> bool:
    """Whether *rule* aims at *backend* on *path* (scoped, or every path it exists on)."""
    return (
        backend in rule.backends
        and backend in policy.backends.get(path, {})
        and (rule.paths is None or path in rule.paths)
    )


def rejections(backend: str, path: str, policy: Policy, facts: Facts, *, picked: bool = False) -> dict[str, str]:
    """Every reason *backend* cannot run on *path* for *facts*: rule id (or catalog id) -> severity.

    *picked*: the deployment chose *backend* explicitly on *path* (``auto: false`` backends
    are candidates only then).
    """
    typed = facts.typed()
    out: dict[str, str] = {}
    entry = policy.backends[path][backend]
    if not getattr(entry, "auto", True) and not picked:
        out[entry.rule_id] = "catalog"
    if evaluate_tree(entry.requires, typed) is False:
        out[entry.rule_id] = "catalog"
    for r in policy.rules:
        if r.kind not in ("deny", "require") or not targets(r, backend, path, policy) or not applies(r, typed):
            continue
        if r.kind == "deny" or evaluate_tree(r.require, typed) is False:
            out[r.id] = r.severity
    return out


def chosen(decision: Decision, path: str) -> Candidate | None:
    pd = decision.paths[path]
    return next((c for c in pd.candidates if c.verdict == "chosen"), None)


def pick_of(decision: Decision, path: str, policy: Policy) -> tuple[str, tuple[str, ...]] | None:
    """The explicit choice that won on *path*: its backend and the rule ids it may override."""
    source = decision.paths[path].explicit
    if source is None:
        return None
    facts = decision.facts
    allowed = tuple(facts.get("deploy.allow_rules", ()) or ())
    if source.startswith(("--moe-backend ", "--linear-backend ")):
        return source.split(" ", 1)[1], allowed
    for r in policy.rules:
        if r.kind == "use" and r.id == source:
            return r.backends[0], r.overrides
        if r.kind == "use" and r.layer == "user" and r.id.split(".env.", 1)[-1] == source:
            return r.backends[0], r.overrides + allowed
    raise AssertionError(f"no explicit choice named `{source}`")


@contextmanager
def no_cache() -> Iterator[None]:
    old = os.environ.get("KERNELPOLICY_NO_CACHE")
    os.environ["KERNELPOLICY_NO_CACHE"] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["KERNELPOLICY_NO_CACHE"]
        else:
            os.environ["KERNELPOLICY_NO_CACHE"] = old


__all__ = [
    "FACT_KEYS",
    "FUZZ_SETTINGS",
    "SETTINGS",
    "Table",
    "applies",
    "chosen",
    "conditions",
    "fresh",
    "is_explicit",
    "load_table",
    "no_cache",
    "pick_of",
    "rejections",
    "rule_dicts",
    "shipped_facts",
    "table_facts",
    "tables",
    "targets",
    "write_table",
]
