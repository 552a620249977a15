"""What a rule means: the one reading of the rule tables that the resolver and ``check`` share.

Conditions are three-valued (true, false, undecided when a fact they read is unknown). This
module fixes how each kind of rule reads them, so that :mod:`kernelpolicy.resolver` (which
decides one deployment) and :mod:`kernelpolicy.analysis` (which proves every deployment of a
finite domain) cannot drift apart:

- a rule *retires* when its ``until`` holds (undecided: not retired);
- a ``deny`` or ``require`` rule *applies* when its ``when`` holds, or is undecided and the rule
  is a ``crash`` rule; ``use`` and ``prefer`` rules and ``order`` entries apply only when true;
- a requirement (catalog ``requires`` or a ``require`` rule's ``require``) whose facts are
  unknown is *assumed met*;
- an explicit choice overrides ``accuracy``, ``perf`` and ``support`` rules, and a ``crash``
  rule or a catalog requirement only when the choice names its id;
- reasons are ranked by :data:`GRAVITY`, gravest first;
- implications set unknown facts from known ones, to a fixpoint; known facts never change; two
  implications that would set one fact to different values for the same facts, or one whose
  ``unless`` comes to hold only after it fired, make the outcome depend on file order and are
  an :class:`ImplicationConflict`.

Every function here is pure and works on either truth values of one deployment or on sets of
them (the analysis feeds it every combination a group of cells can produce).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .dsl.conditions import compiled, tests_of
from .errors import KernelPolicyError
from .facts.keys import DECIDED_PATHS
from .facts.record import Facts, typed_value

if TYPE_CHECKING:
    from .policy import Implication, Rule
    from .reporters import BaseReporter

__all__ = [
    "DECIDED_PATHS",
    "FACT_PICKS",
    "GRAVITY",
    "OVERRIDABLE",
    "ImplicationConflict",
    "Pick",
    "applies",
    "can_override",
    "effect_outcomes",
    "gravity",
    "imply",
    "met",
    "one_pick",
    "pick_outcome",
    "preferred",
    "rule_state",
    "takes_effect",
]

#: Explicit choices of a deployment, read as facts: (fact key, path, flag), in the order the
#: resolver and the proof read them.
FACT_PICKS: Final = (
    ("deploy.moe_backend", "moe", "--moe-backend"),
    ("deploy.linear_backend", "dense", "--linear-backend"),
    ("deploy.attention_backend", "attention", "--attention-backend"),  # issue #39
)
#: How grave a reason is (lower first): a user's own setting, the catalog, then severities.
GRAVITY: Final = {"user": 0, "catalog": 1, "crash": 2, "accuracy": 3, "support": 4, "perf": 5}
#: Severities an explicit choice overrides (with a warning) without naming the rule.
OVERRIDABLE: Final = frozenset({"accuracy", "perf", "support"})

TV = bool | None  # a three-valued truth value


def gravity(severity: str) -> int:
    """The rank of *severity* (unknown severities last)."""
    return GRAVITY.get(severity, 9)


def rule_state(when: TV, until: TV) -> TV:
    """A rule's ``when`` after retirement: false once ``until`` holds."""
    return False if until is True else when


def applies(kind: str, severity: str, state: TV) -> bool:
    """Whether a rule whose (retirement-aware) ``when`` is *state* applies.

    Undecided counts for ``crash`` deny/require rules only: a crash is not risked on a guess.
    """
    if state is True:
        return True
    return state is None and severity == "crash" and kind in ("deny", "require")


def met(requirement: TV) -> bool:
    """Whether a requirement counts as met (unknown facts are assumed to meet it)."""
    return requirement is not False


def takes_effect(kind: str, severity: str, state: TV, requirement: TV = True) -> bool:
    """Whether a rule changes a decision: rejects its backend (deny, unmet require) or applies
    (use, prefer)."""
    if not applies(kind, severity, state):
        return False
    return not met(requirement) if kind == "require" else True


def can_override(severity: str, rule_id: str, named: Iterable[str]) -> bool:
    """Whether an explicit choice that names the rule ids *named* overrides a rejection."""
    return severity in OVERRIDABLE or rule_id in named


def pick_outcome(rejections: Iterable[tuple[str, str]], named: Iterable[str]) -> str:
    """What becomes of an explicit choice, given what rejects it (``(severity, rule id)``
    pairs) and the rule ids the choice names: ``contradiction`` where one of the deployment's
    own settings (severity ``user``) denies it, ``refused`` where a rejection it may not
    override stands, else ``chosen``."""
    found = list(rejections)
    if any(severity == "user" for severity, _ in found):
        return "contradiction"
    named = tuple(named)
    if any(not can_override(severity, rule_id, named) for severity, rule_id in found):
        return "refused"
    return "chosen"


@dataclass(frozen=True)
class Pick:
    """An explicit choice of a backend for a path: where it came from, the rule ids it may
    override, and its layer (``user``: the deployment's own settings; ``policy``: an operator's
    ``use`` rule)."""

    backend: str
    source: str
    overrides: tuple[str, ...]
    layer: str


def one_pick(options: Sequence[Pick]) -> Pick | tuple[Pick, ...] | None:
    """The explicit choice a path takes of *options* (in the order they were read): ``None``
    when there is none; the first of the deployment's own settings, else the first of the
    policy's; or, where the choices of one layer name different backends, those choices (they
    contradict each other: the deployment is refused)."""
    if not options:
        return None
    for layer in ("user", "policy"):
        mine = tuple(o for o in options if o.layer == layer)
        if len({o.backend for o in mine}) > 1:
            return mine
    return next((o for layer in ("user", "policy") for o in options if o.layer == layer), options[0])


def preferred(order: Sequence[str], backends: Iterable[str]) -> list[str]:
    """*order* with the *backends* a ``prefer`` rule names moved to the front, in the rule's order."""
    front = [b for b in backends if b in order]
    return front + [b for b in order if b not in front]


def effect_outcomes(
    rule: Rule,
    when: Iterable[TV],
    until: Iterable[TV] = (None,),
    requirement: Iterable[TV] = (True,),
) -> frozenset[bool]:
    """Every value :func:`takes_effect` can give *rule* when its ``when``, ``until`` and
    ``require`` can take the given truth values (the analysis' reading of a group of cells)."""
    return frozenset(
        takes_effect(rule.kind, rule.severity, rule_state(w, u), q) for w in when for u in until for q in requirement
    )


# --------------------------------------------------------------------------- implications


class ImplicationConflict(KernelPolicyError, ValueError):
    """Implications whose outcome would depend on the order of the files that hold them."""

    def __init__(self, key: str, rules: tuple[str, ...], message: str) -> None:
        self.key = key
        self.rules = rules
        self.message = message
        super().__init__(key, rules, message)

    def __str__(self) -> str:
        return f"implications contradict each other on `{self.key}`: {self.message}"


class _Plan:
    """Implications, looked up once: compiled conditions, the keys each reads, who sets a key."""

    def __init__(self, implications: tuple[Implication, ...]) -> None:
        self.implications = implications
        self.fns = [
            (compiled(imp.when), compiled(imp.unless) if imp.unless is not None else None) for imp in implications
        ]
        self.reads = [
            frozenset(t.key for c in (imp.when, imp.unless) if c is not None for t in tests_of(c))
            for imp in implications
        ]
        self.setters: dict[str, list[int]] = {}
        for i, imp in enumerate(implications):
            for k in imp.sets:
                self.setters.setdefault(k, []).append(i)
        #: (i, key) -> the other setters of *key* that set another value than implication *i*:
        #: the ones that must not fire where *i* set it
        self.rivals = {
            (i, k): tuple(j for j in self.setters[k] if j != i and implications[j].sets[k] != v)
            for i, imp in enumerate(implications)
            for k, v in imp.sets.items()
        }

    def fires(self, i: int, typed: Mapping[str, Any]) -> bool:
        """Whether implication *i* fires: its ``when`` holds and its ``unless`` does not."""
        when, unless = self.fns[i]
        if when(typed) is not True:
            return False
        return unless is None or unless(typed) is not True


_plans: dict[int, _Plan] = {}


def _plan_of(implications: tuple[Implication, ...]) -> _Plan:
    plan = _plans.get(id(implications))
    if plan is None or plan.implications is not implications:
        if len(_plans) >= 64:
            _plans.clear()
        plan = _plans[id(implications)] = _Plan(implications)
    return plan


def imply(facts: Facts, implications: tuple[Implication, ...], reporter: BaseReporter | None = None) -> Facts:
    """Set unknown facts that follow from known ones, to a fixpoint; known facts never change.

    Implications are applied in order, pass after pass, until a pass sets nothing. (A pass
    skips an implication that fired before, or whose facts did not change since it was last
    read: reading it again could not set anything.)

    :raises ImplicationConflict: when two implications set one fact to different values for
        these facts, or an implication's ``unless`` holds once the fixpoint is reached (either
        way the outcome would depend on file order).
    """
    if not implications:
        return facts
    plan = _plan_of(implications)
    typed = dict(facts.typed())
    added: dict[str, Any] = {}
    by: dict[str, Implication] = {}
    at: dict[str, int] = {}  # the position of by[k] in implications
    order: list[str] = []  # the keys set, in order
    read_at = [-1] * len(implications)  # len(order) when each was last read; -1: never
    changed = True
    while changed:
        changed = False
        for i, imp in enumerate(implications):
            seen = read_at[i]
            if seen == -2 or (seen >= 0 and plan.reads[i].isdisjoint(order[seen:])):
                continue
            read_at[i] = len(order)
            if not plan.fires(i, typed):
                continue
            read_at[i] = -2  # fired: every key it sets is known from now on
            for k, v in imp.sets.items():
                if k in typed:
                    continue
                added[k] = v
                typed[k] = typed_value(k, v)
                by[k], at[k] = imp, i
                order.append(k)
                if reporter is not None:
                    reporter.implying(imp.id, k, v)
                changed = True
    if not added:
        return facts
    _check_fixpoint(plan, typed, added, by, at)
    # the values were normalised when the implication was loaded: no need to validate again
    return Facts._of(
        {**facts.values, **added},
        {**facts.sources, **{k: f"implied:{by[k].id}" for k in added}},
        typed,  # every value of the new facts, typed on the way
    )


def _check_fixpoint(
    plan: _Plan,
    typed: Mapping[str, Any],
    added: Mapping[str, Any],
    by: Mapping[str, Implication],
    at: Mapping[str, int],
) -> None:
    implications = plan.implications
    # Whether each implication fires at the fixpoint, asked once: an implication that fired
    # and has no `unless` still fires (a condition that holds goes on holding as facts are added).
    fired: dict[int, bool] = {i: True for i in at.values() if plan.fns[i][1] is None}

    def fires(i: int) -> bool:
        hit = fired.get(i)
        if hit is None:
            hit = fired[i] = plan.fires(i, typed)
        return hit

    for k, v in added.items():
        setter = by[k]
        if not fires(at[k]):
            raise ImplicationConflict(
                k,
                (setter.id,),
                f"`{setter.id}` ({setter.origin}) set it to `{v}`, but its `unless` holds once the other "
                "implications are applied",
            )
        for i in plan.rivals[at[k], k]:
            if not fires(i):
                continue
            imp = implications[i]
            raise ImplicationConflict(
                k,
                (setter.id, imp.id),
                f"`{setter.id}` ({setter.origin}) sets `{v}` and `{imp.id}` ({imp.origin}) sets "
                f"`{imp.sets[k]}` for the same facts",
            )
