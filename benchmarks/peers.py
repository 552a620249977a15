"""kernelpolicy's decision against the policy engines people would otherwise reach for.

    python benchmarks/peers.py            # agreement check, then timings (pip install -e '.[peers]')

One real question, the FP8/FP4 MoE backend of a deployment, is encoded from the shipped rules
(loaded with ``load_policy(environ=False)``) for

- **Cedar** (``cedarpy``), in Cedar's own idiom: a ``permit`` per backend (its catalog
  requirement) and a ``forbid`` per rule and backend it rejects; a request
  ``(Deployment, Action::"moe", Backend::"<id>")`` with the facts as ``context`` asks whether
  ``<id>`` may run. The order is a ``permit`` per order scenario (``Action::"order"``). Cedar's
  whole answer is the first allowed backend of the scenario that holds (several
  authorizations); the timed figure is ONE authorization (the chosen backend's), a bar lower
  than Cedar's full answer. Policies and entities are pre-parsed handles (``PolicySet``,
  ``Entities``), cedarpy's fastest documented API.
- **CEL** (``common-expression-language``): one compiled program that evaluates to the chosen
  backend's id (``"none"`` when nothing is valid): the whole answer in one evaluation.

The encoding is generated from the policy, not written by hand: every condition becomes two
expressions, *definitely true* and *definitely false* (a fact that is absent makes both false),
which gives Cedar and CEL the same three-valued reading kernelpolicy has (a ``crash`` rule
applies while its facts are unknown, an unknown requirement is assumed met). The encoding
reads the catalog order, ``order`` entries, ``prefer`` rules and every ``deny``/``require``
rule aimed at a MoE backend; explicit choices are out of scope (the domain has none).

The domain: every catalog GPU x every catalog MoE model x a few software stacks (vLLM,
FlashInfer, CUDA, Triton versions, some unknown). All three must give the same backend on every
cell before anything is timed. The peers get the facts with implications already applied
(they have no implications); kernelpolicy starts from the raw facts and does everything a
real decision does: implications, all four paths (dense, moe, router, warmup), the complete
explanation available, engine flags. Each timing round runs the three in turn on one cell,
so load on the machine hits them alike. The last line is ``kernelpolicy/cedar: R``, the
median of the per-round ratios.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

import kernelpolicy as kp
from kernelpolicy import resolver
from kernelpolicy.dsl.conditions import All, Any_, Condition, Not, Test
from kernelpolicy.facts.keys import Kind
from kernelpolicy.facts.record import Facts
from kernelpolicy.policy import Policy, Rule
from kernelpolicy.resolver import apply_implications

PATH = "moe"
NONE = "none"
#: Software stacks crossed with every GPU and model (``None``: the fact is unknown).
STACKS: tuple[Mapping[str, str], ...] = (
    {},
    {"vllm.version": "0.26.0", "flashinfer.version": "0.6.6", "cuda.version": "12.8", "triton.version": "3.4.0"},
    {"vllm.version": "0.33.0", "flashinfer.version": "0.6.11", "cuda.version": "12.9", "triton.version": "3.6.0"},
    {"vllm.version": "0.33.0", "flashinfer.version": "0.6.12", "cuda.version": "13.0", "driver.cuda_version": "12.8"},
)


# --------------------------------------------------------------------------- the domain


def domain(policy: Policy, model_step: int = 1) -> list[Facts]:
    """Every catalog GPU (one per distinct set of GPU facts) x catalog MoE model (every
    *model_step*-th) x :data:`STACKS`."""
    gpus = {kp.facts_for(gpu=g.name, policy=policy).key: g.name for g in policy.gpus}
    cells = []
    for gpu, model, stack in itertools.product(gpus.values(), policy.models[::model_step], STACKS):
        f = kp.facts_for(gpu=gpu, model=model.id, facts=dict(stack), policy=policy)
        if f.get("model.is_moe") is True:
            cells.append(f)
    return cells


def version_number(v: Version) -> int:
    """A release version as one comparable integer (both peers compare versions as integers)."""
    parts = [*v.release, 0, 0][:3]
    if v.pre or v.dev or v.local or any(p >= 10_000 for p in parts):
        raise ValueError(f"version `{v}` outside the integer encoding")
    return (parts[0] * 10_000 + parts[1]) * 10_000 + parts[2]


def context_of(facts: Facts, policy: Policy) -> dict[str, Any]:
    """The facts as the peers read them: implications applied, versions as integers, lists as lists."""
    out: dict[str, Any] = {}
    for k, v in apply_implications(facts, policy).typed().items():
        if isinstance(v, Version):
            out[k] = version_number(v)
        elif isinstance(v, (tuple, frozenset)):
            out[k] = list(v)
        else:
            out[k] = v
    return out


# --------------------------------------------------------------------------- the encoding


@dataclass(frozen=True)
class Dialect:
    """How one peer spells the few expressions the encoding needs."""

    var: str  #: the map holding the facts
    has: Callable[[str, str], str]  #: (var, key) -> "the fact is known"
    member: Callable[[str, str], str]  #: (value expr, list literal) -> "value is in the list"
    any_member: Callable[[str, str], str]  #: (list expr, list literal) -> "they share a member"

    def get(self, key: str) -> str:
        return f"{self.var}[{json.dumps(key)}]"


CEDAR = Dialect(
    var="context",
    has=lambda var, key: f"{var} has {json.dumps(key)}",
    member=lambda value, options: f"{options}.contains({value})",
    any_member=lambda value, options: f"{value}.containsAny({options})",
)
CEL = Dialect(
    var="f",
    has=lambda var, key: f"{json.dumps(key)} in {var}",
    member=lambda value, options: f"{value} in {options}",
    any_member=lambda value, options: f"{value}.exists(x, x in {options})",
)


def _lit(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Version):
        return str(version_number(v))
    return json.dumps(v)


def _and(parts: list[str]) -> str:
    parts = [p for p in parts if p != "true"]
    if "false" in parts:
        return "false"
    return "true" if not parts else " && ".join(f"({p})" for p in parts)


def _or(parts: list[str]) -> str:
    parts = [p for p in parts if p != "false"]
    if "true" in parts:
        return "true"
    return "false" if not parts else " || ".join(f"({p})" for p in parts)


def _not(p: str) -> str:
    return {"true": "false", "false": "true"}.get(p, f"!({p})")


def _test(d: Dialect, t: Test) -> str:
    """*t* on a known fact (the caller guards with ``has``)."""
    v = d.get(t.key)
    if t.kind is Kind.INT_LIST:
        raise NotImplementedError(f"integer-list test on `{t.key}`")
    if t.op == "eq":
        return f"{v} == {_lit(t.operand)}"
    if t.op == "in" and t.kind is not Kind.VERSION:
        return d.member(v, "[" + ", ".join(_lit(o) for o in sorted(t.operand)) + "]")
    if t.op == "has":
        return d.any_member(v, "[" + ", ".join(_lit(o) for o in sorted(t.operand)) + "]")
    if t.op == "cmp":
        return f"{v} {t.operand[0]} {t.operand[1]}"
    if t.op == "spec":
        return _spec(v, t.operand)
    raise NotImplementedError(f"test `{t.op}` on `{t.key}`")


def _spec(v: str, spec: SpecifierSet) -> str:
    parts = []
    for s in spec:
        if s.operator not in ("<", "<=", ">", ">=", "==", "!=") or "*" in s.version:
            raise NotImplementedError(f"version specifier `{s}`")
        op = "==" if s.operator == "==" else s.operator
        parts.append(f"{v} {op} {version_number(Version(s.version))}")
    return _and(parts)


def truth(d: Dialect, c: Condition) -> tuple[str, str]:
    """``(definitely true, definitely false)`` of *c*: Kleene's logic in two-valued expressions."""
    if isinstance(c, Test):
        known = d.has(d.var, c.key)
        test = _test(d, c)
        return f"{known} && ({test})", f"{known} && !({test})"
    if isinstance(c, Not):
        t, f = truth(d, c.child)
        return f, t
    kids = [truth(d, k) for k in c.children]
    if isinstance(c, All):
        return _and([t for t, _ in kids]), _or([f for _, f in kids])
    assert isinstance(c, Any_)
    return _or([t for t, _ in kids]), _and([f for _, f in kids])


def _state_true(d: Dialect, r: Rule) -> str:
    """The rule's ``when`` holds and its ``until`` does not (it is in force)."""
    return _and([truth(d, r.when)[0], _not(truth(d, r.until)[0]) if r.until is not None else "true"])


def _rejects(d: Dialect, r: Rule) -> str:
    """*r* rejects its backend: it applies (a crash rule also while undecided) and, for a
    ``require`` rule, its requirement is definitely false."""
    if r.severity == "crash":
        applies = _and([_not(truth(d, r.when)[1]), _not(truth(d, r.until)[0]) if r.until is not None else "true"])
    else:
        applies = _state_true(d, r)
    return applies if r.kind == "deny" else _and([applies, truth(d, r.require)[1]])


def valid(d: Dialect, policy: Policy, backend: str) -> str:
    """*backend* may run on the path: offered automatically, catalog requirement not false, no rule rejects it."""
    entry = policy.backends[PATH][backend]
    if not entry.auto:
        return "false"
    parts = [_not(truth(d, entry.requires)[1])]
    parts += [_not(_rejects(d, r)) for r in policy.rules_for(backend, PATH)]
    return _and(parts)


def scenarios(d: Dialect, policy: Policy) -> Iterator[tuple[str, list[str]]]:
    """``(guard, backend order)`` for every way the order can come out: which ``order`` entry
    holds (policy layer first), and which ``prefer`` rules are in force (by layer, then id)."""
    catalog = list(policy.backends[PATH])
    entries = sorted(policy.orders.get(PATH, ()), key=lambda o: o.origin.layer != "policy")
    heads: list[tuple[str, list[str]]] = []
    earlier: list[str] = []
    for o in entries:
        t = truth(d, o.when)[0]
        heads.append((_and([*earlier, t]), list(o.backends)))
        earlier.append(_not(t))
    heads.append((_and(earlier), []))
    prefers = [r for r in policy.rules if r.kind == "prefer" and r.applies_to(PATH)]
    prefers.sort(key=lambda r: (r.layer != "shipped", r.id))
    if len(prefers) > 6:
        raise NotImplementedError("more than 6 prefer rules on the path")
    for guard, base in heads:
        if guard == "false":
            continue
        for on in itertools.product((False, True), repeat=len(prefers)):
            order = base + [b for b in catalog if b not in base]
            conds = [guard]
            for r, active in zip(prefers, on, strict=True):
                s = _state_true(d, r)
                conds.append(s if active else _not(s))
                if active:
                    front = [b for b in r.backends if b in order]
                    order = front + [b for b in order if b not in front]
            g = _and(conds)
            if g != "false":
                yield g, order


def cel_source(policy: Policy) -> str:
    """One CEL expression: the chosen backend's id, ``"none"`` when none is valid."""
    v = {b: valid(CEL, policy, b) for b in policy.backends[PATH]}
    out = json.dumps(NONE)
    for guard, order in reversed(list(scenarios(CEL, policy))):
        pick = json.dumps(NONE)
        for b in reversed(order):
            pick = f"({v[b]}) ? {json.dumps(b)} : ({pick})"
        out = f"({guard}) ? ({pick}) : ({out})"
    return out


def cedar_source(policy: Policy) -> str:
    """Cedar policies in Cedar's own idiom: a ``permit`` per backend (its catalog requirement), a
    ``forbid`` per rule and backend it rejects, and a ``permit`` per order scenario
    (``Action::"order"``, resource ``Order::"<n>"``)."""
    out = []
    for b, entry in policy.backends[PATH].items():
        if entry.auto:
            when = _not(truth(CEDAR, entry.requires)[1])
            out.append(f'@id("{entry.rule_id}")\n{_scope("permit", b)}\nwhen {{ {when} }};')
        for r in policy.rules_for(b, PATH):
            out.append(f'@id("{r.id}:{b}")\n{_scope("forbid", b)}\nwhen {{ {_rejects(CEDAR, r)} }};')
    for i, (guard, _) in enumerate(scenarios(CEDAR, policy)):
        scope = f'permit(principal, action == Action::"order", resource == Order::"{i}")'
        out.append(f'@id("order-{i}")\n{scope}\nwhen {{ {guard} }};')
    return "\n".join(out)


def _scope(effect: str, backend: str) -> str:
    return f'{effect}(principal, action == Action::"{PATH}", resource == Backend::"{backend}")'


# --------------------------------------------------------------------------- the three engines


@dataclass
class Peers:
    policy: Policy
    cells: list[Facts]
    contexts: list[dict[str, Any]]
    cedar_policies: Any
    cedar_entities: Any
    cel_program: Any
    orders: list[list[str]]  #: the backend order of each scenario (as numbered in the Cedar policies)

    def kernelpolicy(self, i: int) -> str:
        resolver._cache.clear()
        return kp.resolve(self.cells[i], self.policy).paths[PATH].backend or NONE

    def cedar(self, i: int, backend: str, action: str = PATH) -> bool:
        """One authorization: may *backend* run on the path for cell *i*?"""
        import cedarpy

        kind = "Backend" if action == PATH else "Order"
        request = {
            "principal": 'Deployment::"d"',
            "action": f'Action::"{action}"',
            "resource": f'{kind}::"{backend}"',
            "context": self.contexts[i],
        }
        return bool(cedarpy.is_authorized(request, self.cedar_policies, self.cedar_entities).allowed)

    def cedar_choice(self, i: int) -> str:
        """The whole answer from Cedar: the order scenario that holds, then the first backend
        of its order that Cedar allows (one authorization each)."""
        held = [order for n, order in enumerate(self.orders) if self.cedar(i, str(n), "order")]
        if len(held) != 1:
            raise AssertionError(f"cedar: {len(held)} order scenarios hold for one deployment")
        return next((b for b in held[0] if self.cedar(i, b)), NONE)

    def cel(self, i: int) -> str:
        return str(self.cel_program.execute({"f": self.contexts[i]}))


def prepare(policy: Policy | None = None, model_step: int = 1, cells: list[Facts] | None = None) -> Peers:
    """Load the shipped rules, build the domain (see :func:`domain`; or take *cells*) and both
    encodings (needs cedarpy and cel)."""
    import cedarpy
    import cel

    policy = policy or kp.load_policy(environ=False)
    cells = domain(policy, model_step) if cells is None else cells
    return Peers(
        policy=policy,
        cells=cells,
        contexts=[context_of(f, policy) for f in cells],
        cedar_policies=cedarpy.PolicySet.from_str(cedar_source(policy)),  # type: ignore[attr-defined]
        cedar_entities=cedarpy.Entities.from_json_str("[]"),
        cel_program=cel.compile(cel_source(policy)),
        orders=[order for _, order in scenarios(CEDAR, policy)],
    )


def disagreements(peers: Peers, step: int = 1) -> list[str]:
    """Every cell (every *step*-th one) where Cedar or CEL chooses differently from
    kernelpolicy, in words."""
    out = []
    for i in range(0, len(peers.cells), step):
        f = peers.cells[i]
        want = peers.kernelpolicy(i)
        got = {"cedar": peers.cedar_choice(i), "cel": peers.cel(i)}
        for name, b in got.items():
            if b != want:
                where = f"{f.get('gpu.sm')} {f.get('model.type')} {f.get('quant.moe_scheme')} {f.get('vllm.version')}"
                out.append(f"{name}: `{b}`, kernelpolicy: `{want}` ({where})")
    return out


# --------------------------------------------------------------------------- timing


def main() -> None:
    """``peers.py [ROUNDS [MODEL_STEP]]``: timing rounds (3000), every MODEL_STEP-th catalog model (1)."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    peers = prepare(model_step=int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    n = len(peers.cells)
    chosen = [peers.kernelpolicy(i) for i in range(n)]
    wrong = disagreements(peers)
    print(
        f"domain: {n} deployments (GPUs x MoE models x {len(STACKS)} stacks); "
        f"{len(set(chosen))} distinct MoE backends chosen: {', '.join(sorted(set(chosen)))}"
    )
    if wrong:
        print(f"{len(wrong)} disagreements, first: {wrong[0]}")
        sys.exit(1)
    print("cedar and CEL agree with kernelpolicy on every cell")

    def clock(fn: Callable[[], object]) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    kpt, cet, clt = [], [], []
    policy = peers.policy
    for r in range(rounds):
        i = r % n
        f, ctx, pick = peers.cells[i], peers.contexts[i], chosen[i]
        resolver._cache.clear()
        kpt.append(clock(lambda: kp.resolve(f, policy)))  # noqa: B023
        cet.append(clock(lambda: peers.cedar(i, pick)))  # noqa: B023
        clt.append(clock(lambda: peers.cel_program.execute({"f": ctx})))  # noqa: B023
    cached = []
    for r in range(rounds):
        f = peers.cells[r % n]
        kp.resolve(f, policy)
        cached.append(clock(lambda: kp.resolve(f, policy)))  # noqa: B023

    med = statistics.median
    print(f"kernelpolicy, full decision (4 paths, uncached): {1e6 * med(kpt):8.1f} us")
    print(f"kernelpolicy, cached decision:                   {1e6 * med(cached):8.2f} us")
    print(f"cedar, one authorization (pre-parsed handles):   {1e6 * med(cet):8.1f} us")
    print(f"CEL, one compiled program:                       {1e6 * med(clt):8.1f} us")
    print(f"kernelpolicy/CEL: {med([a / b for a, b in zip(kpt, clt, strict=True)]):.2f}")
    print(f"kernelpolicy/cedar: {med([a / b for a, b in zip(kpt, cet, strict=True)]):.2f}")


if __name__ == "__main__":
    main()
