"""The finite domain a policy defines, and its exhaustive enumeration in groups of cells.

Every fact key some condition of the policy reads (a rule's ``when``/``require``/``until``, a
catalog ``requires``, an ``order``'s ``when``, an implication) becomes a *dimension*. Its
values are the classes of facts that no condition can tell apart:

- an ENUM or BOOL key: its values (and *unknown*, unless the key is always known);
- a string key: each value the rules mention, one value no rule mentions, and *unknown*;
- a version key: one representative per interval between the specifier boundaries the
  rules use, and *unknown*;
- an integer key: one representative per interval between the numbers the rules compare
  with, and *unknown*.

Values that every test answers alike are merged into one class. ``gpu.sm`` carries the
facts it settles (:func:`~kernelpolicy.facts.gpu.derived_gpu_facts`: family, compute
capability, FP8 and tcgen05 MMA) with it, so no cell pairs ``sm121`` with family ``sm100`` or
without FP8 (a deployment stating such facts is refused before any decision).

:func:`outcomes` computes the truth values a condition can take while some dimensions are
still open (an over-approximation over sets of possible values, implications included);
:mod:`kernelpolicy.analysis.coverage` uses it to enumerate the domain in groups of cells
that share one decision.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Final, Generic, TypeVar

from packaging.specifiers import Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..dsl.conditions import All, Condition, Not, Test, tests_of
from ..errors import FactError
from ..facts.gpu import derived_gpu_facts
from ..facts.keys import BACKENDS, CANONICAL, GPU_SMS, FactKey, Kind, lookup_key
from ..facts.record import int_list_length, normalise_value, typed_value
from ..policy import Policy, Rule
from ..semantics import FACT_PICKS

__all__ = [
    "ALWAYS_KNOWN",
    "Dimension",
    "Domain",
    "Group",
    "ValueClass",
    "build_domain",
    "class_facts",
    "for_path",
    "meet",
    "merge",
    "outcomes",
    "pool_values",
    "possible_values",
    "rule_outcome",
]

#: Keys a deployment always knows (the GPU, the model's identity and scheme, the defaults).
ALWAYS_KNOWN: Final = frozenset(
    {
        "gpu.sm",
        "gpu.family",
        "gpu.cc",
        "quant.scheme",
        "quant.moe_scheme",
        "model.type",
        "model.is_moe",
        "deploy.tp",
        "deploy.ep",
        "deploy.engine",
        # the serving modes default like the parallel sizes (issue 35): never unknown to the resolver
        "deploy.dcp",
        "deploy.speculative",
        "deploy.two_batch_overlap",
        "deploy.disaggregation",
    }
)
#: Keys the resolver reads directly (not through a condition).
DIRECT_KEYS: Final = ("model.is_moe",)
EXPLICIT_KEYS: Final = tuple(key for key, _, _ in FACT_PICKS)
#: Keys that exist only for MoE models.
MOE_KEYS: Final = frozenset({"quant.moe_scheme", "deploy.moe_backend"})
#: Keys the GPU settles (:func:`~kernelpolicy.facts.gpu.derived_gpu_facts`): one dimension.
GPU_KEYS: Final = ("gpu.sm", "gpu.family", "gpu.cc", "gpu.has_fp8", "gpu.has_tcgen05")
OTHER: Final = "<other>"
UNKNOWN: Final = "unknown"


@dataclass(frozen=True)
class ValueClass:
    """Values of one dimension that no condition tells apart, and the facts they set."""

    label: str
    facts: Mapping[str, Any]  #: raw fact values (empty: the facts are unknown)
    typed: Mapping[str, Any]  #: the same values as conditions compare them
    weight: int = 1  #: how many domain values the class stands for
    #: the classes this one merges (see :func:`for_path`); empty for a class of the domain
    parts: tuple[ValueClass, ...] = ()

    def covers(self, other: ValueClass) -> bool:
        """Whether *other* (a class of the full domain) is this class or one it merges."""
        return other == self or other in self.parts

    @property
    def members(self) -> tuple[ValueClass, ...]:
        """The classes of the full domain this one stands for (itself, for such a class)."""
        return self.parts or (self,)


def merge(classes: Sequence[ValueClass]) -> ValueClass:
    """One class standing for *classes* (classes of the full domain; the class itself when
    there is one). Its facts are the first one's."""
    if len(classes) == 1:
        return classes[0]
    rep = classes[0]
    return ValueClass(
        "|".join(c.label for c in classes), rep.facts, rep.typed, sum(c.weight for c in classes), tuple(classes)
    )


def meet(a: ValueClass, b: ValueClass) -> ValueClass | None:
    """The classes of the full domain two classes of one dimension share (``None``: none)."""
    if a == b:
        return a
    common = [m for m in a.members if b.covers(m)]
    return merge(common) if common else None


@dataclass(frozen=True)
class Dimension:
    name: str
    keys: tuple[str, ...]
    values: tuple[ValueClass, ...]
    moe_only: bool = False

    @cached_property
    def size(self) -> int:
        """The values the dimension stands for (its classes' weights summed)."""
        return sum(v.weight for v in self.values)


@dataclass(frozen=True)
class Domain:
    """The dimensions of a policy's finite domain, and what each condition reads."""

    dims: tuple[Dimension, ...]
    pruned: tuple[str, ...]  #: vocabulary keys no condition reads (not enumerated)
    conditions: tuple[tuple[str, frozenset[str], Any], ...] = field(repr=False, default=())

    def dim(self, name: str) -> Dimension:
        return next(d for d in self.dims if d.name == name)

    @cached_property
    def tests_by_key(self) -> dict[str, list[Test]]:
        """Every test of the conditions, by the key it reads, in condition order (what tells a
        key's classes apart; made once)."""
        return _tests_by_key(self.conditions)

    @property
    def size(self) -> int:
        """The number of cells: MoE models times every dimension, dense models without MoE ones."""
        total = 0
        for moe in (True, False):
            n = 1
            for d in self.dims:
                if d.name == "model.is_moe" or (d.moe_only and not moe):
                    continue
                n *= d.size
            total += n
        return total


@dataclass(frozen=True)
class Group:
    """Cells that agree on ``fixed``; every other dimension may take any of its values."""

    fixed: Mapping[str, ValueClass]  #: dimension name -> class
    weight: int  #: the number of cells
    facts: Mapping[str, Any]  #: one representative cell, as raw fact values

    def label(self, dims: Sequence[str] | None = None) -> str:
        names = dims if dims is not None else list(self.fixed)
        parts = []
        for n in names:
            v = self.fixed.get(n)
            if v is not None:
                parts.append(v.label if n in _BARE else f"{n}={v.label}")
        return " x ".join(parts) or "every cell"


_BARE: Final = frozenset({"gpu.sm", "model.type", "quant.scheme"})


# --------------------------------------------------------------------------- building


def _policy_conditions(policy: Policy) -> list[tuple[str, frozenset[str], Condition]]:
    """(owner, paths it matters for, condition) for every condition of *policy*."""
    out: list[tuple[str, frozenset[str], Condition]] = []
    for path, entries in policy.backends.items():
        for b in entries.values():
            out.append((b.rule_id, frozenset({path, "warmup"} if b.warmup else {path}), b.requires))
    for path, orders in policy.orders.items():
        for o in orders:
            out.append((o.id, frozenset({path}), o.when))
    for r in policy.rules:
        paths = rule_paths(r, policy)
        for c in (r.when, r.require, r.until):
            if c is not None:
                out.append((r.id, paths, c))
    for imp in policy.implications:
        for c in (imp.when, imp.unless):
            if c is not None:
                out.append((imp.id, frozenset({"*"}), c))
    for u in policy.unsupported:
        out.append((u.id, frozenset(u.paths), u.when))
    return out


def rule_paths(r: Rule, policy: Policy) -> frozenset[str]:
    """The paths *r* can affect."""
    if r.paths:
        return frozenset(r.paths)
    out = {p for p, entries in policy.backends.items() if any(b in entries for b in r.backends)}
    if r.kind == "deny" and any(
        e.warmup for entries in policy.backends.values() for k, e in entries.items() if k in r.backends
    ):
        out.add("warmup")
    return frozenset(out)


def _version_points(tests: Sequence[Test]) -> list[Version]:
    points: set[Version] = set()

    def add(text: str) -> None:
        with contextlib.suppress(InvalidVersion):
            points.add(Version(text))

    for t in tests:
        operands = t.operand if isinstance(t.operand, tuple) else (t.operand,)
        for op in operands:
            if isinstance(op, Version):
                points.add(op)
            elif isinstance(op, SpecifierSet):
                for s in op:
                    _spec_points(s, add)
    return sorted(points)


def _spec_points(s: Specifier, add: Any) -> None:
    v = s.version
    if v.endswith(".*"):
        base = v[:-2]
        add(base)
        parts = base.split(".")
        if parts[-1].isdigit():
            add(".".join([*parts[:-1], str(int(parts[-1]) + 1)]))
        return
    add(v)
    if s.operator == "~=":
        parts = v.split(".")
        if len(parts) >= 2 and parts[-2].isdigit():
            add(".".join([*parts[:-2], str(int(parts[-2]) + 1)]))


def _between(lo: Version | None, hi: Version | None) -> Version | None:
    """A final release strictly between *lo* and *hi* (either may be open)."""
    if lo is None and hi is None:
        return Version("1.0")
    if lo is None:
        assert hi is not None
        tiny = Version("0.0.0.0.1")
        return tiny if hi > tiny else None
    if hi is None:
        return Version(".".join(map(str, (*lo.release[:-1], lo.release[-1] + 1))))
    for zeros in range(4):
        cand = Version(".".join(map(str, (*lo.release, *([0] * zeros), 1))))
        if lo < cand < hi:
            return cand
    return None


def _int_points(tests: Sequence[Test]) -> list[int]:
    pts: set[int] = set()
    for t in tests:
        if t.op == "cmp":
            pts.add(int(t.operand[1]))
        elif t.op == "eq" and isinstance(t.operand, int):
            pts.add(t.operand)
        elif t.op == "in":
            pts.update(v for v in t.operand if isinstance(v, int))
    return sorted(pts)


def _classes(
    key: str,
    values: Sequence[Any],
    tests: Sequence[Test],
    labels: Sequence[str],
    weights: Sequence[int],
    known: bool,
    merge_unknown: bool = False,
) -> tuple[ValueClass, ...]:
    """Merge candidate values that every test on *key* answers alike.

    With *merge_unknown*, *unknown* joins the class no test matches (see :func:`_positive_only`).
    """
    groups: dict[tuple[bool, ...], list[int]] = {}
    for i, tv in enumerate(values):
        sig = tuple(t.match(tv) for t in tests)
        groups.setdefault(sig, []).append(i)
    out = [
        ValueClass(
            "|".join(labels[i] for i in idx),
            {key: values[idx[0]]},
            {key: values[idx[0]]},
            sum(weights[i] for i in idx),
        )
        for idx in groups.values()
    ]
    if not known:
        none_sig = tuple(False for _ in tests)
        blank = list(groups).index(none_sig) if none_sig in groups else None
        if blank is not None and merge_unknown:
            c = out[blank]
            out[blank] = ValueClass(f"{c.label}|{UNKNOWN}", {}, {}, c.weight + 1)
        else:
            out.append(ValueClass(UNKNOWN, {}, {}, 1))
    return tuple(out)


def _positive_only(policy: Policy) -> frozenset[str]:
    """Keys for which *unknown* acts exactly like a value no test matches.

    That holds for a key read only outside ``not`` and only where a condition counts when
    it is true (non-crash ``when``s, ``use``/``prefer``/``order`` conditions, ``until``,
    implications): there Kleene logic reaches true with an unknown test exactly when it
    does with a false one. A key an implication sets is never such a key (it is set only
    while unknown).
    """
    strict: set[str] = set()
    loose: set[str] = set()

    def visit(c: Condition, tolerant: bool) -> None:
        for t, negated in _signed_tests(c, False):
            (loose if tolerant and not negated else strict).add(t.key)

    for entries in policy.backends.values():
        for b in entries.values():
            visit(b.requires, False)
    for orders in policy.orders.values():
        for o in orders:
            visit(o.when, True)
    for r in policy.rules:
        visit(r.when, r.severity != "crash")
        if r.kind == "require":
            visit(r.require, False)
        if r.until is not None:
            visit(r.until, True)
    for imp in policy.implications:
        visit(imp.when, True)
        if imp.unless is not None:
            visit(imp.unless, True)
    # an implication sets a key only while it is unknown: there *unknown* and a value differ
    strict.update(k for imp in policy.implications for k in imp.sets)
    return frozenset(loose - strict)


def _signed_tests(c: Condition, negated: bool) -> list[tuple[Test, bool]]:
    if isinstance(c, Test):
        return [(c, negated)]
    if isinstance(c, Not):
        return _signed_tests(c.child, not negated)
    return [x for child in c.children for x in _signed_tests(child, negated)]


def _version_classes(key: str, tests: Sequence[Test], known: bool) -> tuple[ValueClass, ...]:
    points = _version_points(tests)
    reps: list[tuple[Version, str]] = []
    bounds: list[Version | None] = [None, *points, None]
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        if lo is not None:
            reps.append((lo, f"=={lo}"))
        mid = _between(lo, hi)
        if mid is not None:
            reps.append((mid, f">{lo},<{hi}" if lo and hi else f"<{hi}" if hi else f">{lo}"))
    groups: dict[tuple[bool, ...], list[int]] = {}
    for i, (v, _) in enumerate(reps):
        groups.setdefault(tuple(t.match(v) for t in tests), []).append(i)
    out: list[ValueClass] = []
    for idx in groups.values():
        lo_v = reps[idx[0]][0]
        hi_v = reps[idx[-1]][0]
        contiguous = idx == list(range(idx[0], idx[-1] + 1))
        if contiguous:
            lo_txt = reps[idx[0]][1]
            low = f">={lo_v}" if lo_txt.startswith("==") else lo_txt.split(",")[0]
            if low.startswith("<"):
                low = ""
            nxt = next((p for p in points if p > hi_v), None)
            label = ",".join(x for x in (low, f"<{nxt}" if nxt else "") if x) or "any"
        else:
            label = "|".join(reps[i][1] for i in idx)
        out.append(ValueClass(label, {key: str(lo_v)}, {key: lo_v}, 1))
    if not known:
        out.append(ValueClass(UNKNOWN, {}, {}, 1))
    return tuple(out)


def _tests_by_key(conditions: Iterable[tuple[Any, Any, Condition]]) -> dict[str, list[Test]]:
    out: dict[str, list[Test]] = {}
    for _, _, c in conditions:
        for t in tests_of(c):
            out.setdefault(t.key, []).append(t)
    return out


def build_domain(policy: Policy, *, explicit: bool = False) -> Domain:
    """The dimensions of *policy*'s finite domain (see the module docstring).

    :param explicit: also enumerate explicit choices (``deploy.moe_backend`` and
        ``deploy.linear_backend``: unset or each backend of the path).
    """
    conds = _policy_conditions(policy)
    positive = _positive_only(policy)
    by_key = _tests_by_key(conds)
    dims: list[Dimension] = []

    gpu_tests = [t for k in GPU_KEYS for t in by_key.get(k, [])]
    sigs: dict[tuple[bool, ...], list[str]] = {}
    for sm in GPU_SMS:
        vals = derived_gpu_facts(sm)
        sig = tuple(t.match(vals[t.key]) for t in gpu_tests)
        sigs.setdefault(sig, []).append(sm)
    gpu_classes = []
    for sms in sigs.values():
        vals = derived_gpu_facts(sms[0])
        raw = {k: v for k, v in vals.items() if k in ("gpu.sm", "gpu.family", "gpu.cc") or k in by_key}
        gpu_classes.append(ValueClass("|".join(sms), raw, _typed(raw), len(sms)))
    dims.append(Dimension("gpu.sm", tuple(raw), tuple(gpu_classes)))

    dims.append(
        Dimension(
            "model.is_moe",
            ("model.is_moe",),
            (
                ValueClass("moe", {"model.is_moe": True}, {"model.is_moe": True}),
                ValueClass("dense", {"model.is_moe": False}, {"model.is_moe": False}),
            ),
        )
    )
    if explicit:  # tested first after the model's kind: a pick decides before every rule does
        for key, path, _ in FACT_PICKS:
            ids = [b for b in BACKENDS[path] if b in policy.backends.get(path, {})]
            picked = tuple(ValueClass(b, {key: b}, {key: b}) for b in ids)
            dims.append(Dimension(key, (key,), (*picked, ValueClass("unset", {}, {})), key in MOE_KEYS))
    moe_paths = {"moe", "router"}
    readers: dict[str, set[str]] = {}
    for _, paths, c in conds:
        for t in tests_of(c):
            readers.setdefault(t.key, set()).update(paths)

    order = sorted(
        (k for k in by_key if k not in GPU_KEYS and k != "model.is_moe"),
        key=lambda k: (_PRIORITY.get(k, 50), k),
    )
    for key in order:
        fk = lookup_key(key)
        if fk is None:  # pragma: no cover - the loader refuses unknown keys
            continue
        tests = by_key[key]
        known = key in ALWAYS_KNOWN
        moe_only = key in MOE_KEYS or (bool(readers.get(key)) and readers[key] <= moe_paths)
        classes = _key_classes(key, fk, tests, known, key in positive)
        if classes is None:  # pragma: no cover - every kind is handled
            continue
        dims.append(Dimension(key, (key,), classes, moe_only))

    read = {k for d in dims for k in d.keys}
    from ..facts.keys import FACT_KEYS

    pruned = tuple(sorted(k for k in FACT_KEYS if k not in read and k not in GPU_KEYS))
    return Domain(tuple(dims), pruned, tuple((o, p, c) for o, p, c in conds))


def _key_classes(
    key: str, fk: FactKey, tests: Sequence[Test], known: bool, merge: bool
) -> tuple[ValueClass, ...] | None:
    """The value classes of one key: the values its tests tell apart (see the module docstring)."""
    classes: tuple[ValueClass, ...]
    if fk.kind in (Kind.ENUM, Kind.BOOL):
        values: list[Any] = list(fk.domain) if fk.kind is Kind.ENUM else [True, False]
        labels = [str(v).lower() for v in values]
        classes = _classes(key, values, tests, labels, [1] * len(values), known, merge)
    elif fk.kind is Kind.VERSION:
        classes = _version_classes(key, tests, known)
    elif fk.kind is Kind.INT:
        pts = _int_points(tests)
        near = {*pts, *(p + 1 for p in pts), *(p - 1 for p in pts)}
        reps = sorted(r for r in near if _takes(key, r)) or [1]  # a size is at least 1: no `tp=0` cell
        reps.sort(key=lambda r: (r not in pts and r - 1 not in pts, -r))
        classes = _classes(key, reps, tests, [str(r) for r in reps], [0] * len(reps), known)
        classes = tuple(_relabel_int(c, tests) for c in classes)
    elif fk.kind is Kind.STR:
        mentioned = sorted({str(v) for t in tests for v in (t.operand if t.op == "in" else (t.operand,))})
        canonical = CANONICAL.get(key)
        if canonical is not None:  # the value no test names must still be a valid one
            other = canonical.spare(frozenset(mentioned))
        else:
            other = OTHER if OTHER not in mentioned else OTHER + "_"
        strs = [*mentioned, other]
        classes = _classes(
            key,
            strs,
            tests,
            [*mentioned, OTHER if canonical is not None else other],
            [1] * len(strs),
            known and not key.startswith("deploy.env."),
            merge,
        )
    elif fk.kind in (Kind.STR_LIST, Kind.INT_LIST):
        members = sorted(
            {m for t in tests for m in (t.operand if t.op in ("has", "in") else (t.operand,))},
            key=repr,
        )
        items: list[Any]
        if fk.kind is Kind.INT_LIST:
            items = [tuple(m) if isinstance(m, tuple) else m for m in members]
            items.append(_other_int_list(key, items))
            labels = [str(list(v)) for v in items[:-1]] + [OTHER]
        else:
            items = [(m,) for m in members] + [()]
            labels = [f"[{m}]" for m in members] + ["[]"]
        classes = _classes(key, items, tests, labels, [1] * len(items), known, merge)
    else:  # pragma: no cover
        return None
    return classes


def _takes(key: str, value: int) -> bool:
    """Whether the fact *key* takes *value* (sizes and counts are at least 1)."""
    try:
        normalise_value(key, value)
    except FactError:
        return False
    return True


def _other_int_list(key: str, members: list[Any]) -> tuple[int, ...]:
    """A value of the integer-list fact *key* that no condition names, and that the fact takes
    (a fixed-length list such as ``quant.block`` holds that many positive sizes)."""
    size = int_list_length(key)
    n = 1 if size else 0
    while (other := (n,) * (size or 1)) in members:
        n += 1
    return other


def for_path(domain: Domain, path: str) -> Domain:
    """*domain* as one path sees it: the classes of each dimension that no condition able to
    matter to *path* (its rules, orders, catalog entries and ``unsupported`` entries, warmup
    rules and implications) tells apart are merged, so the walk of that path never splits
    cells that only another path's conditions distinguish. *unknown* is never merged with a
    value (crash rules read it differently)."""
    tests: dict[str, list[Test]] = {}
    for _, paths, c in domain.conditions:
        if path in paths or "warmup" in paths or "*" in paths:
            for t in tests_of(c):
                tests.setdefault(t.key, []).append(t)
    dims: list[Dimension] = []
    for d in domain.dims:
        if d.name in ("gpu.sm", "model.is_moe"):
            dims.append(d)
            continue
        mine = [t for k in d.keys for t in tests.get(k, [])]
        groups: dict[tuple[Any, ...], list[ValueClass]] = {}
        for v in d.values:
            sig = ("unknown",) if not v.facts else tuple(t.match(v.typed[t.key]) for t in mine if t.key in v.typed)
            groups.setdefault(sig, []).append(v)
        merged = tuple(
            vs[0]
            if len(vs) == 1
            else ValueClass(
                "|".join(v.label for v in vs), vs[0].facts, vs[0].typed, sum(v.weight for v in vs), tuple(vs)
            )
            for vs in groups.values()
        )
        dims.append(replace(d, values=merged))
    return replace(domain, dims=tuple(dims))


_PRIORITY: Final = {
    "quant.scheme": 1,
    "quant.moe_scheme": 2,
    "model.type": 3,
    "vllm.version": 4,
    "deploy.ep": 5,
    "host.machine": 6,
}


def _typed(raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        fk = lookup_key(k)
        out[k] = Version(str(v)) if fk is not None and fk.kind is Kind.VERSION else v
    return out


def _relabel_int(c: ValueClass, tests: Sequence[Test]) -> ValueClass:
    if c.label == UNKNOWN or "|" not in c.label:
        return ValueClass(c.label, c.facts, c.typed, 1)
    nums = sorted(int(x) for x in c.label.split("|"))
    mentioned = {n for t in tests for n in _int_points([t])}
    named = [str(n) for n in nums if n in mentioned]
    label = "|".join(named) if named else f"other ({c.facts[next(iter(c.facts))]})"
    if named and len(named) < len(nums):
        label += "|other"
    return ValueClass(label, c.facts, c.typed, 1)


# --------------------------------------------------------------------------- abstract evaluation

_T: Final = frozenset({True})
_F: Final = frozenset({False})


_Item = TypeVar("_Item")
_Answer = TypeVar("_Answer")


class KeyMemo(Generic[_Item, _Answer]):
    """Answers of ``compute(item, possible)`` memoised on *item* and the values ``possible``
    gives the keys *item* reads (``keys_of(item)``, found once per item). The walk asks the
    same questions of many groups that differ only in keys the item does not read. Items are
    held beside their ids (an id is reused only after its object is gone); the answers are
    dropped when there are *limit* of them."""

    def __init__(
        self,
        keys_of: Callable[[_Item], Iterable[str]],
        compute: Callable[[_Item, Mapping[str, frozenset[Any]]], _Answer],
        limit: int = 500_000,
    ) -> None:
        self._keys_of, self._compute, self._limit = keys_of, compute, limit
        self._keys: dict[int, tuple[_Item, tuple[str, ...]]] = {}
        self._answers: dict[tuple[int, tuple[frozenset[Any] | None, ...]], _Answer] = {}

    def __call__(self, item: _Item, possible: Mapping[str, frozenset[Any]]) -> _Answer:
        entry = self._keys.get(id(item))
        if entry is None or entry[0] is not item:
            entry = self._keys[id(item)] = (item, tuple(sorted(set(self._keys_of(item)))))
        key = (id(item), tuple(map(possible.get, entry[1])))
        hit = self._answers.get(key)
        if hit is None:
            if len(self._answers) >= self._limit:
                self._answers.clear()
            hit = self._answers[key] = self._compute(item, possible)
        return hit


class IdMemo(Generic[_Item, _Answer]):
    """Answers of ``compute(item, *more)`` by the object asked about (*more*: what the answer
    is read from besides, which the item determines): the walk asks of the same few classes and
    dimensions hundreds of thousands of times, and an identity is cheaper to look up than a
    class's facts are to hash. Items are held beside their answers (an id is reused only after
    its object is gone); the answers are dropped when there are *limit* of them."""

    def __init__(self, compute: Callable[..., _Answer], limit: int = 200_000) -> None:
        self._compute, self._limit = compute, limit
        self._answers: dict[int, tuple[_Item, _Answer]] = {}

    def __call__(self, item: _Item, *more: Any) -> _Answer:
        hit = self._answers.get(id(item))
        if hit is None or hit[0] is not item:
            if len(self._answers) >= self._limit:
                self._answers.clear()
            hit = self._answers[id(item)] = (item, self._compute(item, *more))
        return hit[1]


def outcomes(cond: Condition, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool | None]:
    """Every truth value *cond* can take when each key ranges over ``possible[key]``.

    ``None`` in a set stands for *unknown*. An over-approximation: keys read twice are
    treated as independent. Memoised on the values of the keys *cond* reads.
    """
    return _OUTCOMES(cond, possible)


def _outcomes(cond: Condition, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool | None]:
    if isinstance(cond, Test):
        vals = possible.get(cond.key, frozenset({None}))
        return frozenset(None if v is None else cond.match(v) for v in vals)
    if isinstance(cond, Not):
        return frozenset(None if r is None else not r for r in _outcomes(cond.child, possible))
    conj = isinstance(cond, All)
    acc: frozenset[bool | None] = _T if conj else _F
    for child in cond.children:
        sub = _outcomes(child, possible)
        acc = frozenset(_and(a, b) if conj else _or(a, b) for a in acc for b in sub)
    return acc


_OUTCOMES: Final[KeyMemo[Condition, frozenset[bool | None]]] = KeyMemo(
    lambda cond: (t.key for t in tests_of(cond)), _outcomes
)


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def rule_outcome(r: Rule, possible: Mapping[str, frozenset[Any]]) -> frozenset[bool | None]:
    """The truth values a rule's ``when`` can take, ``until`` (retirement) included."""
    w = outcomes(r.when, possible)
    if r.until is None:
        return w
    u = outcomes(r.until, possible)
    return frozenset(False if x is True else y for x in u for y in w)


# --------------------------------------------------------------------------- enumeration


def possible_values(domain: Domain, fixed: Mapping[str, ValueClass], policy: Policy) -> dict[str, frozenset[Any]]:
    """The values each key can take under *fixed*, implications included (over-approximated).

    A key an implication may set can also hold the implied values; it loses *unknown* only
    when an implication certainly sets it from facts no implication changes.
    """
    base: dict[str, frozenset[Any]] = {}
    for d in domain.dims:
        base.update(pool_values(d, fixed.get(d.name)))
    if not policy.implications:
        return base
    setters = _setters(policy)
    cur = base
    for _ in range(len(policy.implications) + 2):
        nxt = dict(base)
        for k, imps in setters.items():
            b = base.get(k, _NONE)
            if None not in b:
                continue
            vals: set[Any] = set()
            certain = False
            for imp, tv, keys in imps:
                fires = outcomes(imp.when, cur)
                if True not in fires:
                    continue
                blocks = outcomes(imp.unless, cur) if imp.unless is not None else _F
                if blocks == _T:
                    continue
                vals.add(tv)
                stable = all(q not in setters or None not in base.get(q, _NONE) for q in keys)
                if fires == _T and True not in blocks and stable:
                    certain = True
                    break
            nxt[k] = (b - _NONE if certain else b) | vals
        if nxt == cur:
            break
        cur = {k: cur.get(k, frozenset()) | v for k, v in nxt.items()} if _ > len(policy.implications) else nxt
    return dict(cur)


_NONE: Final = frozenset({None})


def pool_values(d: Dimension, chosen: ValueClass | None) -> dict[str, frozenset[Any]]:
    """The values each key of *d* takes over *chosen* (``None``: over the whole dimension)."""
    if chosen is None:
        return _DIMENSION_POOLS(d, d.values, d.keys)
    return _CLASS_POOLS(chosen, chosen.members, d.keys)


def _pool(_: object, pool: Sequence[ValueClass], keys: Sequence[str]) -> dict[str, frozenset[Any]]:
    return {k: frozenset(v.typed.get(k) for v in pool) for k in keys}


_DIMENSION_POOLS: Final[IdMemo[Dimension, dict[str, frozenset[Any]]]] = IdMemo(_pool)
_CLASS_POOLS: Final[IdMemo[ValueClass, dict[str, frozenset[Any]]]] = IdMemo(_pool)


def _setters(policy: Policy) -> dict[str, list[tuple[Any, Any, frozenset[str]]]]:
    cached: dict[str, list[tuple[Any, Any, frozenset[str]]]] | None = policy.__dict__.get("_kp_setters")
    if cached is None:
        cached = {}
        for imp in policy.implications:
            keys = frozenset(t.key for c in (imp.when, imp.unless) if c is not None for t in tests_of(c))
            for k, v in imp.sets.items():
                cached.setdefault(k, []).append((imp, _typed({k: v})[k], keys))
        object.__setattr__(policy, "_kp_setters", cached)
    return cached


def implied_sources(policy: Policy) -> dict[str, list[Condition]]:
    """For each key an implication sets, the conditions that decide whether it does."""
    src: dict[str, list[Condition]] = {}
    for imp in policy.implications:
        for k in imp.sets:
            src.setdefault(k, []).append(imp.when)
            if imp.unless is not None:
                src[k].append(imp.unless)
    return src


def class_facts(v: ValueClass) -> tuple[dict[str, Any], dict[str, Any]]:
    """The facts class *v* gives a cell, checked against the vocabulary (unknown ones left
    out), and as conditions compare them; computed once per class."""
    return _CLASS_FACTS(v)


def _class_facts(v: ValueClass) -> tuple[dict[str, Any], dict[str, Any]]:
    values = {k: normalise_value(k, x) for k, x in v.facts.items() if x is not None}
    return values, {k: typed_value(k, x) for k, x in values.items()}


_CLASS_FACTS: Final[IdMemo[ValueClass, tuple[dict[str, Any], dict[str, Any]]]] = IdMemo(_class_facts, 20_000)
