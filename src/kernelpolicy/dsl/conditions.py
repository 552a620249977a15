"""Conditions over facts: a small, decidable language with three-valued evaluation.

A condition is written in YAML as a mapping of fact keys to expected values; several keys
in one mapping must all hold. The expected value is

- a scalar: equality (``gpu.family: sm120``);
- a list: any of (``model.type: [qwen3_5_text, qwen3_5_moe_text]``);
- for version keys, a PEP 440 specifier (``triton.version: ">=3.6"``);
- for integer keys, a comparison (``model.hidden_size: ">= 4096"``);
- for list-valued keys (``vllm.cuda_archs``), a member that must be present.

``all: [...]``, ``any: [...]`` and ``not: {...}`` combine conditions. A fact that is not known
makes a test *unknown*; ``all``/``any``/``not`` follow Kleene's three-valued logic, so a
condition is true, false or unknown (``None``), and the resolver decides what unknown means
for each kind of rule.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from ..facts.keys import CANONICAL, Kind, lookup_key

__all__ = [
    "TRUE",
    "All",
    "Any_",
    "Condition",
    "ConditionError",
    "Not",
    "Test",
    "TruthValue",
    "compiled",
    "describe_failure",
    "evaluate",
    "evaluate_tree",
    "failing_tests",
    "parse_condition",
    "tests_of",
]

TruthValue = bool | None
Values = Mapping[str, Any]

_CMP: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_CMP_RE: Final = re.compile(r"\s*(<=|>=|==|!=|<|>)\s*(-?\d+)\s*\Z")
_SPEC_START: Final = ("<", ">", "=", "!", "~")


class ConditionError(ValueError):
    """A condition that does not parse; ``path`` says where inside the condition."""

    def __init__(self, message: str, path: tuple[str | int, ...] = (), help: str | None = None):
        self.message = message
        self.path = path
        self.help = help
        super().__init__(message)


@dataclass(frozen=True)
class Test:
    """One fact compared with one expected value (or a set of them)."""

    key: str
    kind: Kind
    op: str  #: "eq", "in", "spec", "cmp", "has"
    operand: Any  #: normalised expected value(s)
    text: str  #: the expected value as written, for explanations

    def match(self, value: Any) -> bool:
        """Whether a known (normalised) fact value satisfies this test."""
        op, operand = self.op, self.operand
        if op == "eq":
            return bool((tuple(value) if self.kind is Kind.INT_LIST else value) == operand)
        if op == "in":
            if self.kind is Kind.VERSION:
                return any(_version_match(o, value) for o in operand)
            return (tuple(value) if self.kind is Kind.INT_LIST else value) in operand
        if op == "spec":
            return bool(operand.contains(value, prereleases=True))
        if op == "cmp":
            return _CMP[operand[0]](value, operand[1])
        return bool(operand & set(value))  # "has"

    def describe(self) -> str:
        return f"`{self.key}` {self.text}"


@dataclass(frozen=True)
class All:
    children: tuple[Condition, ...]


@dataclass(frozen=True)
class Any_:
    children: tuple[Condition, ...]


@dataclass(frozen=True)
class Not:
    child: Condition


Condition = Test | All | Any_ | Not
#: The condition that always holds (an empty ``all``).
TRUE: Final[Condition] = All(())


_Fn = Callable[[Values], TruthValue]
_COMPILED: dict[int, tuple[Condition, _Fn]] = {}
#: Compiled conditions kept at most (the shipped tables have about 600; a long-lived process, the
#: language server, loads a new policy on every edit and would keep every one it ever saw).
_COMPILED_KEPT: Final = 20_000


def _remember(cond: Condition) -> tuple[Condition, _Fn]:
    if len(_COMPILED) >= _COMPILED_KEPT:
        _COMPILED.clear()
    hit = _COMPILED[id(cond)] = (cond, _compile(cond))
    return hit


def evaluate(cond: Condition, values: Values) -> TruthValue:
    """True, False, or None when the facts in *values* do not decide *cond*."""
    hit = _COMPILED.get(id(cond))
    if hit is None or hit[0] is not cond:
        hit = _remember(cond)
    return hit[1](values)


def compiled(cond: Condition) -> Callable[[Values], TruthValue]:
    """*cond* as a function of the facts: ``compiled(c)(values) == evaluate(c, values)``, without
    the lookup :func:`evaluate` makes on every call (for callers that evaluate one condition often)."""
    hit = _COMPILED.get(id(cond))
    if hit is None or hit[0] is not cond:
        hit = _remember(cond)
    return hit[1]


def _compile(cond: Condition) -> _Fn:
    """A closure that evaluates *cond* (same result as :func:`evaluate_tree`, faster)."""
    if isinstance(cond, Test):
        key, match = cond.key, cond.match
        if cond.op == "eq" and cond.kind is not Kind.INT_LIST:
            want = cond.operand

            def eq(values: Values) -> TruthValue:
                v = values.get(key)
                return None if v is None else v == want

            return eq
        if cond.op == "in" and cond.kind not in (Kind.INT_LIST, Kind.VERSION):
            options = cond.operand

            def isin(values: Values) -> TruthValue:
                v = values.get(key)
                return None if v is None else v in options

            return isin

        def test(values: Values) -> TruthValue:
            v = values.get(key)
            return None if v is None else match(v)

        return test
    if isinstance(cond, Not):
        inner = _compile(cond.child)

        def negate(values: Values) -> TruthValue:
            r = inner(values)
            return None if r is None else not r

        return negate
    kids = tuple(_compile(c) for c in cond.children)
    if len(kids) == 1:
        return kids[0]
    decisive = isinstance(cond, Any_)  # the value that settles the whole

    def combine(values: Values) -> TruthValue:
        unknown = False
        for k in kids:
            r = k(values)
            if r is decisive:
                return decisive
            if r is None:
                unknown = True
        return None if unknown else not decisive

    return combine


def evaluate_tree(cond: Condition, values: Values) -> TruthValue:
    """The reference evaluator: a direct walk of the tree (see :func:`evaluate`)."""
    if isinstance(cond, Test):
        v = values.get(cond.key)
        return None if v is None else cond.match(v)
    if isinstance(cond, All):
        unknown = False
        for c in cond.children:
            r = evaluate_tree(c, values)
            if r is False:
                return False
            if r is None:
                unknown = True
        return None if unknown else True
    if isinstance(cond, Any_):
        unknown = False
        for c in cond.children:
            r = evaluate_tree(c, values)
            if r is True:
                return True
            if r is None:
                unknown = True
        return None if unknown else False
    r = evaluate_tree(cond.child, values)
    return None if r is None else not r


def describe_failure(cond: Condition, values: Values) -> str:
    """Why *cond* is false for *values*, in words: the failing parts only, with the facts.

    ``all`` lists its failing members, ``any`` shows its alternatives as ``one of (a | b)``.
    """
    if isinstance(cond, Test):
        v = values.get(cond.key)
        return f"{cond.describe()} (is `{_shown(v)}`)" if v is not None else f"{cond.describe()} (unknown)"
    if isinstance(cond, Not):
        return "not " + ", ".join(t.describe() for t in tests_of(cond.child))
    if isinstance(cond, All):
        return "; ".join(describe_failure(k, values) for k in cond.children if evaluate(k, values) is not True)
    return "one of (" + " | ".join(describe_failure(k, values) for k in cond.children) + ")"


def _shown(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return ", ".join(map(str, v)) if isinstance(v, tuple) else str(v)


def tests_of(cond: Condition) -> list[Test]:
    """Every test inside *cond*, in source order."""
    if isinstance(cond, Test):
        return [cond]
    if isinstance(cond, Not):
        return tests_of(cond.child)
    return [t for c in cond.children for t in tests_of(c)]


def failing_tests(cond: Condition, values: Values) -> tuple[list[Test], list[Test]]:
    """Why *cond* is not true: the tests that fail, and the tests left unknown.

    Tests under ``not`` are reported when they *hold* (that is what makes the ``not`` fail).
    """
    failed: list[Test] = []
    unknown: list[Test] = []
    if evaluate(cond, values) is not True:
        _failing(cond, False, values, failed, unknown)
    return failed, unknown


def _failing(c: Condition, negated: bool, values: Values, failed: list[Test], unknown: list[Test]) -> None:
    # a module function, not a closure that calls itself: that is a reference cycle per call,
    # which only the cyclic collector frees (the exhaustive walk words reasons by the thousand)
    if isinstance(c, Test):
        v = values.get(c.key)
        if v is None:
            unknown.append(c)
        elif c.match(v) == negated:
            failed.append(c)
    elif isinstance(c, Not):
        _failing(c.child, not negated, values, failed, unknown)
    elif evaluate(c, values) is not (not negated):
        for child in c.children:
            _failing(child, negated, values, failed, unknown)


# --------------------------------------------------------------------------- parsing


def parse_condition(data: Any, path: tuple[str | int, ...] = ()) -> Condition:
    """Build a condition from its YAML form.

    :raises ConditionError: with the path (inside *data*) of the first problem.
    """
    if not isinstance(data, Mapping):
        raise ConditionError("a condition must be a mapping of fact keys to values", path, _COND_HELP)
    parts: list[Condition] = []
    for key, value in data.items():
        here = (*path, key)
        if key in ("all", "any"):
            if not isinstance(value, list) or not value:
                raise ConditionError(f"`{key}` takes a non-empty list of conditions", here)
            kids = tuple(parse_condition(v, (*here, i)) for i, v in enumerate(value))
            parts.append(All(kids) if key == "all" else Any_(kids))
        elif key == "not":
            parts.append(Not(parse_condition(value, here)))
        else:
            parts.append(parse_test(key, value, here))
    if not parts:
        raise ConditionError("empty condition", path, _COND_HELP)
    return parts[0] if len(parts) == 1 else All(tuple(parts))


_COND_HELP: Final = "e.g. `{gpu.family: sm120, model.type: [qwen3_5_text, qwen3_5_moe_text]}`"


def parse_test(key: str, value: Any, path: tuple[str | int, ...] = ()) -> Test:
    """One ``key: expected`` pair of a condition."""
    fk = lookup_key(key)
    if fk is None:
        from ..errors import did_you_mean
        from ..facts.keys import FACT_KEYS

        hint = did_you_mean(key, FACT_KEYS)
        raise ConditionError(
            f"unknown fact key `{key}`",
            path,
            f"did you mean `{hint[0]}`?" if hint else "see `kernelpolicy facts --keys`",
        )
    kind = fk.kind
    if isinstance(value, list) and kind not in (Kind.INT_LIST,):
        if not value:
            raise ConditionError(f"`{key}`: an empty list matches nothing", path)
        if kind is Kind.STR_LIST:
            members = frozenset(_scalar(fk, v, path) for v in value)
            return Test(key, kind, "has", members, _fmt(value))
        if kind is Kind.VERSION:
            specs = tuple(_version_operand(key, v, path) for v in value)
            return Test(key, kind, "in", specs, _fmt(value))
        options = frozenset(_scalar(fk, v, path) for v in value)
        return Test(key, kind, "in", options, _fmt(value))
    if kind is Kind.INT_LIST:
        if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
            opts = frozenset(tuple(_int_list(key, v, path)) for v in value)
            return Test(key, kind, "in", opts, _fmt(value))
        want = tuple(_int_list(key, value, path))
        return Test(key, kind, "eq", want, _fmt(value))
    if kind is Kind.VERSION:
        operand = _version_operand(key, value, path)
        op = "spec" if isinstance(operand, SpecifierSet) else "eq"
        return Test(key, kind, op, operand, _fmt(value))
    if kind is Kind.INT and isinstance(value, str):
        cm = _CMP_RE.match(value)
        if cm is None:
            raise ConditionError(f"`{key}` expects an integer or a comparison such as `>= 4096`, got `{value}`", path)
        return Test(key, kind, "cmp", (cm.group(1), int(cm.group(2))), value.strip())
    if kind is Kind.STR_LIST:
        member = _scalar(fk, value, path)
        return Test(key, kind, "has", frozenset({member}), f"has {_fmt(value)}")
    want_v = _scalar(fk, value, path)
    return Test(key, kind, "eq", want_v, _fmt(value))


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "is " + ("true" if value else "false")
    if isinstance(value, list):
        return "in [" + ", ".join(_fmt(v).removeprefix("is ").removeprefix("= ") for v in value) + "]"
    text = str(value)
    if text[:1] in _SPEC_START:
        return text
    return f"= {text}"


def _scalar(fk: Any, value: Any, path: tuple[str | int, ...]) -> Any:
    """Normalise one expected scalar for an ENUM/STR/BOOL/INT/STR_LIST key."""
    key, kind = fk.name, fk.kind
    if kind is Kind.BOOL:
        if not isinstance(value, bool):
            raise ConditionError(f"`{key}` expects true or false, got `{value}`", path)
        return value
    if kind is Kind.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConditionError(f"`{key}` expects an integer, got `{value}`", path)
        return value
    if isinstance(value, (dict, list)) or value is None:
        raise ConditionError(f"`{key}` expects a string, got `{value}`", path)
    if isinstance(value, float):
        raise ConditionError(f"`{key}`: `{value}` reads as a number", path, "quote it: YAML reads `12.10` as 12.1")
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if kind is Kind.ENUM and text not in fk.domain:
        from ..errors import did_you_mean

        hint = did_you_mean(text, fk.domain)
        raise ConditionError(
            f"`{key}` has no value `{text}`",
            path,
            f"did you mean `{hint[0]}`?" if hint else "one of: " + ", ".join(fk.domain),
        )
    if key in CANONICAL:
        canon, what, _ = CANONICAL[key]
        short = canon(text)
        if short is None:
            raise ConditionError(f"`{key}`: `{text}` is not {what}", path)
        return short
    return text


def _int_list(key: str, value: Any, path: tuple[str | int, ...]) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ConditionError(f"`{key}` expects a list of integers, got `{value}`", path)
    return list(value)


def _version_operand(key: str, value: Any, path: tuple[str | int, ...]) -> Version | SpecifierSet:
    if isinstance(value, float):
        raise ConditionError(f"`{key}`: `{value}` reads as a number", path, 'quote versions: `"3.10"`, not 3.10')
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConditionError(f"`{key}` expects a version or a version specifier", path)
    text = str(value).strip()
    if text[:1] in _SPEC_START:
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            raise ConditionError(
                f"`{key}`: `{text}` is not a valid version specifier",
                path,
                'e.g. `">=3.6"` or `">=0.24,<0.26"`',
            ) from None
        return spec
    try:
        want = Version(text)
    except ValueError:  # InvalidVersion, or more digits than int() converts
        raise ConditionError(f"`{key}`: `{text}` is not a valid version", path) from None
    return want


def _version_match(operand: Version | SpecifierSet, value: Any) -> bool:
    if isinstance(operand, SpecifierSet):
        return bool(operand.contains(value, prereleases=True))
    return bool(value == operand)
