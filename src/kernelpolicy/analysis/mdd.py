"""A multi-valued, multi-terminal decision diagram over the domain's value classes.

The proof compiles every path's decision into one of these (:mod:`.compile`) instead of
walking regions of cells. A diagram is a function from cells (one value class per level) to a
terminal value. It is *ordered* (levels are tested in one fixed order, :attr:`Manager.sizes`'
index; a level may be skipped, meaning the function does not depend on it), *reduced* (a node
whose children are all one node is that node) and *hash-consed* (equal functions are one node,
so equality is ``==`` on two ints, and a sub-function shared by many regions of the domain is
built and read once).

Nodes are ints. A terminal holds any hashable value; an inner node holds its level and one
child per class of that level. Every operation is memoised on the nodes it reads, so its cost
grows with the diagram's size, not with the number of cells (about 10^35 for the shipped
tables).

:class:`Manager` has a node budget: past it, :class:`DiagramTooLarge` is raised (the caller
turns it into one clear line) rather than eating the machine's memory.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Final

from ..errors import KernelPolicyError

__all__ = ["DEFAULT_BUDGET", "DiagramTooLarge", "Manager"]

#: The most nodes one manager makes before it gives up (about 0.3 KB each: ~1 GB at the limit).
DEFAULT_BUDGET: Final = 3_000_000


class DiagramTooLarge(KernelPolicyError, MemoryError):
    """A diagram grew past the manager's node budget."""

    def __init__(self, budget: int, what: str = "") -> None:
        self.budget = budget
        self.what = what
        super().__init__(budget, what)

    def __str__(self) -> str:
        where = f" while compiling {self.what}" if self.what else ""
        return (
            f"the proof's decision diagram passed {self.budget:,} nodes{where}: the rules read too many "
            "facts together; narrow the conditions of the rules named, or split the file"
        )


_Fn1 = Callable[[Any], Any]
_Fn2 = Callable[[Any, Any], Any]


class Manager:
    """The nodes of every diagram over one sequence of levels.

    :param sizes: the number of classes of each level, top first.
    :param weights: how many domain values each class stands for (default: 1 each); counts
        (:meth:`count`) are weighted by them, so they equal cell counts.
    """

    def __init__(
        self, sizes: Sequence[int], weights: Sequence[Sequence[int]] | None = None, budget: int = DEFAULT_BUDGET
    ) -> None:
        if any(n < 1 for n in sizes):
            raise ValueError("every level needs at least one class")
        self.sizes = tuple(sizes)
        self.weights = tuple(tuple(w) for w in weights) if weights is not None else tuple((1,) * n for n in sizes)
        if [len(w) for w in self.weights] != list(self.sizes):
            raise ValueError("one weight per class of each level")
        self.depth = len(self.sizes)  #: the level of a terminal: below every level
        self.budget = budget
        self.what = ""  #: what is being compiled, for the budget's message
        self._level: list[int] = []
        self._kids: list[tuple[int, ...]] = []
        self._value: dict[int, Any] = {}
        self._unique: dict[tuple[int, tuple[int, ...]], int] = {}
        self._terms: dict[Any, int] = {}
        self._ite: dict[tuple[int, int, int], int] = {}
        self._memo1: dict[Hashable, dict[int, int]] = {}
        self._memo2: dict[Hashable, dict[tuple[int, int], int]] = {}
        self._picked: dict[tuple[int, tuple[int, ...]], int] = {}
        #: the memos of operations defined outside (a diagram read through a substitution of its
        #: levels, :meth:`~.compile.Compiled.compose`), by what they compute: shared by every
        #: policy compiled in this manager (the two sides of a diff)
        self.memos: dict[Hashable, dict[int, int]] = {}
        self.true = self.term(True)
        self.false = self.term(False)

    # -- making nodes

    def __len__(self) -> int:
        return len(self._level)

    def term(self, value: Hashable) -> int:
        """The terminal holding *value* (``True`` and ``1`` are told apart)."""
        key = (type(value), value)
        n = self._terms.get(key)
        if n is None:
            n = self._new(self.depth, ())
            self._terms[key] = n
            self._value[n] = value
        return n

    def node(self, level: int, kids: Sequence[int]) -> int:
        """The node testing *level* with one child per class (reduced, hash-consed)."""
        kids = tuple(kids)
        first = kids[0]
        if kids.count(first) == len(kids):
            return first
        key = (level, kids)
        n = self._unique.get(key)
        if n is None:
            if len(self._level) >= self.budget:
                raise DiagramTooLarge(self.budget, self.what)
            n = self._unique[key] = len(self._level)
            self._level.append(level)
            self._kids.append(kids)
        return n

    def var(self, level: int, values: Sequence[Hashable]) -> int:
        """The function of one level: class *i* gives ``values[i]``."""
        if len(values) != self.sizes[level]:
            raise ValueError(f"level {level} has {self.sizes[level]} classes, not {len(values)}")
        return self.node(level, [self.term(v) for v in values])

    def _new(self, level: int, kids: tuple[int, ...]) -> int:
        if len(self._level) >= self.budget:
            raise DiagramTooLarge(self.budget, self.what)
        self._level.append(level)
        self._kids.append(kids)
        return len(self._level) - 1

    # -- reading nodes

    def level(self, n: int) -> int:
        return self._level[n]

    def kids(self, n: int) -> tuple[int, ...]:
        return self._kids[n]

    def is_term(self, n: int) -> bool:
        return self._level[n] == self.depth

    def value(self, n: int) -> Any:
        """A terminal's value."""
        return self._value[n]

    def cofactor(self, n: int, level: int, i: int) -> int:
        """*n* with *level* fixed to class *i* (*level* at or above *n*'s)."""
        return self._kids[n][i] if self._level[n] == level else n

    # -- operations

    def apply1(self, op: Hashable, fn: _Fn1, a: int) -> int:
        """``fn`` applied to every terminal of *a*; *op* names ``fn`` in the memo."""
        memo = self._memo1.get(op)
        if memo is None:
            memo = self._memo1[op] = {}
        hit = memo.get(a)
        if hit is not None:
            return hit
        levels, kids_of, depth, value = self._level, self._kids, self.depth, self._value
        node, term = self.node, self.term

        def go(n: int) -> int:
            # a child already known is read from the memo here, not by a call (most are)
            if levels[n] == depth:
                out = term(fn(value[n]))
            else:
                kids = []
                for k in kids_of[n]:
                    got = memo.get(k)
                    kids.append(go(k) if got is None else got)
                out = node(levels[n], kids)
            memo[n] = out
            return out

        return go(a)

    def apply2(
        self, op: Hashable, fn: _Fn2, a: int, b: int, short: Callable[[int, int], int | None] | None = None
    ) -> int:
        """``fn`` of the two diagrams' terminals, cell by cell; *short* may answer without
        descending (``None``: descend)."""
        memo = self._memo2.get(op)
        if memo is None:
            memo = self._memo2[op] = {}
        hit = memo.get((a, b))
        if hit is not None:
            return hit
        levels, kids_of, sizes, depth, value = self._level, self._kids, self.sizes, self.depth, self._value
        node, term = self.node, self.term

        def go(a: int, b: int) -> int:
            found = short(a, b) if short is not None else None
            if found is not None:
                out = found
            else:
                la, lb = levels[a], levels[b]
                if la == depth and lb == depth:
                    out = term(fn(value[a], value[b]))
                else:
                    top = la if la < lb else lb
                    ka = kids_of[a] if la == top else (a,) * sizes[top]
                    kb = kids_of[b] if lb == top else (b,) * sizes[top]
                    kids = []
                    for pair in zip(ka, kb, strict=True):
                        got = memo.get(pair)
                        kids.append(go(*pair) if got is None else got)
                    out = node(top, kids)
            memo[(a, b)] = out
            return out

        return go(a, b)

    def ite(self, c: int, t: int, e: int) -> int:
        """Where boolean *c* is true, *t*; elsewhere *e*."""
        true, false = self.true, self.false
        if c == true or t == e:
            return t
        if c == false:
            return e
        if t == true and e == false:
            return c
        memo = self._ite
        hit = memo.get((c, t, e))
        if hit is not None:
            return hit
        levels, kids_of, sizes, node = self._level, self._kids, self.sizes, self.node

        def go(c: int, t: int, e: int) -> int:
            lc, lt, le = levels[c], levels[t], levels[e]
            top = min(lc, lt, le)
            size = sizes[top]
            kc = kids_of[c] if lc == top else (c,) * size
            kt = kids_of[t] if lt == top else (t,) * size
            ke = kids_of[e] if le == top else (e,) * size
            kids = []
            for key in zip(kc, kt, ke, strict=True):  # the cases that need no descent, answered here
                x, y, z = key
                if x == true or y == z:
                    kids.append(y)
                elif x == false:
                    kids.append(z)
                elif y == true and z == false:
                    kids.append(x)
                else:
                    got = memo.get(key)
                    kids.append(go(x, y, z) if got is None else got)
            out = memo[(c, t, e)] = node(top, kids)
            return out

        return go(c, t, e)

    def select(self, sel: int, options: Sequence[int]) -> int:
        """In each cell, ``options[i]`` where *sel*'s terminal is the class index *i*: a
        multi-way :meth:`ite` in one descent (a diagram read through a substitution of a level,
        :meth:`~.compile.Compiled.compose`). Options *sel* never selects are never read."""
        return self._multiway(sel, tuple(options), self._picked, None)

    def switch(self, sel: int, options: Mapping[Hashable, int], reach: Mapping[int, frozenset[Any]]) -> int:
        """In each cell, ``options[v]`` where *sel*'s terminal is *v*: a multi-way :meth:`ite`
        over the values of *sel* (*reach*: :meth:`reach` of *sel*) in one descent. Each node of
        *sel* carries only the options of the values it reaches (hundreds at its root, a few
        below), so an option is read only where *sel* selects it: it may be anything elsewhere."""
        rank = {v: i for i, v in enumerate(options)}
        ordered: dict[frozenset[Any], tuple[Any, ...]] = {}  # a node's values, in *options*' order
        moves: dict[tuple[frozenset[Any], frozenset[Any]], tuple[int, ...]] = {}  # parent -> child positions

        def values(s: int) -> tuple[Any, ...]:
            got = ordered.get(reach[s])
            if got is None:
                got = ordered[reach[s]] = tuple(sorted(reach[s], key=rank.__getitem__))
            return got

        def move(s: int, k: int) -> tuple[int, ...]:
            key = (reach[s], reach[k])
            got = moves.get(key)
            if got is None:
                where = {v: p for p, v in enumerate(values(s))}
                got = moves[key] = tuple(where[v] for v in values(k))
            return got

        return self._multiway(sel, tuple(options[v] for v in values(sel)), {}, move)

    def _multiway(
        self,
        sel: int,
        options: tuple[int, ...],
        memo: dict[tuple[int, tuple[int, ...]], int],
        move: Callable[[int, int], tuple[int, ...]] | None,
    ) -> int:
        """The descent of :meth:`select` and :meth:`switch`: *options* are those *sel*'s node
        may select; ``move(s, k)``, the positions among them that its child *k* still may
        (``None``: every option is carried, and a terminal's value is its position)."""
        levels, kids_of, sizes, value, depth = self._level, self._kids, self.sizes, self._value, self.depth
        node = self.node

        def go(s: int, opts: tuple[int, ...]) -> int:
            if levels[s] == depth:
                chosen: int = opts[value[s]] if move is None else opts[0]
                return chosen
            key = (s, opts)
            hit = memo.get(key)
            if hit is not None:
                return hit
            top = min(levels[s], *(levels[o] for o in opts))
            size = sizes[top]
            ks = kids_of[s] if levels[s] == top else (s,) * size
            split = [kids_of[o] if levels[o] == top else (o,) * size for o in opts]
            if move is None:
                kids = [go(ks[j], tuple(k[j] for k in split)) for j in range(size)]
            else:
                kids = [go(k, tuple(split[p][j] for p in move(s, k))) for j, k in enumerate(ks)]
            out = memo[key] = node(top, kids)
            return out

        return go(sel, options)

    def first(self, care: int, judges: Sequence[int], decide: Callable[[int, Any], Any], last: Hashable) -> int:
        """The first of a sequence of judgements that decides, cell by cell, where *care* holds.

        Stage *i* reads the diagram ``judges[i]``: ``decide(i, value)`` is what the cell becomes
        when that judge gives *value*, or ``None`` to go on to the next stage; a cell no stage
        decides becomes *last*. Outside *care* (a boolean diagram) the result is left to whatever
        keeps it small: combine it with :meth:`ite` on *care*. Its memo lives for the call: a
        sequence is judged once (one path's explicit choices and order), and its states are many.

        It is one top-down pass over *care* and the judges together (not a chain of if-then-elses
        over the whole domain): only the judges still pending up to the first one that surely
        decides are carried, so regions the earlier stages leave in one residual state share one
        sub-result, and nothing is built outside *care*.
        """
        memo: dict[tuple[int, int, tuple[int, ...]], int] = {}  # a state, its judges trimmed -> result
        levels, depth, kids_of, sizes, value = self._level, self.depth, self._kids, self.sizes, self._value
        false, dont = self.false, -1
        count = len(judges)
        verdicts: dict[tuple[int, int], int] = {}  # (stage, terminal) -> its result, or dont: go on
        seen: dict[tuple[int, int, tuple[int, ...]], int] = {}

        def verdict(pos: int, x: int) -> int:
            got = verdicts.get((pos, x))
            if got is None:
                v = decide(pos, value[x])
                got = verdicts[(pos, x)] = dont if v is None else self.term(v)
            return got

        def go(c: int, pos: int, nodes: tuple[int, ...]) -> int:
            raw = (c, pos, nodes)  # the state as the parent passes it: most are met again
            hit = seen.get(raw)
            if hit is None:
                hit = seen[raw] = dont if c == false else settle(c, pos, nodes)
            return hit

        def settle(c: int, pos: int, nodes: tuple[int, ...]) -> int:
            while pos < count and levels[nodes[0]] == depth:
                got = verdict(pos, nodes[0])
                if got != dont:
                    return got
                pos, nodes = pos + 1, nodes[1:]
            if pos == count:
                return self.term(last)
            mine = nodes
            for k, x in enumerate(nodes):  # what can matter: up to the first judge that surely decides
                if levels[x] == depth and verdict(pos + k, x) != dont:
                    mine = nodes[: k + 1]
                    break
            hit = memo.get((c, pos, mine))
            if hit is not None:
                return hit
            at = [levels[x] for x in mine]
            top = min(levels[c], *at)
            size = sizes[top]
            kc = kids_of[c] if levels[c] == top else (c,) * size
            # one tuple of the judges' children per class
            rows = zip(*[kids_of[x] if lv == top else (x,) * size for x, lv in zip(mine, at, strict=True)], strict=True)
            out_kids = []
            for ci, row in zip(kc, rows, strict=True):
                known = seen.get((ci, pos, row))
                out_kids.append(go(ci, pos, row) if known is None else known)
            fill = next((k for k in out_kids if k != dont), dont)
            out = dont if fill == dont else self.node(top, [fill if k == dont else k for k in out_kids])
            memo[(c, pos, mine)] = out
            return out

        found = go(care, 0, tuple(judges))
        return self.term(last) if found == dont else found

    def AND(self, a: int, b: int) -> int:
        return self.ite(a, b, self.false)

    def OR(self, a: int, b: int) -> int:
        return self.ite(a, self.true, b)

    def NOT(self, a: int) -> int:
        return self.ite(a, self.false, self.true)

    def eq(self, a: int, value: Hashable) -> int:
        """Boolean: where *a* gives *value*."""
        t = self.term(value)
        return self.apply1(("eq", t), lambda v: self.term(v) == t, a)

    def where(
        self, a: int, pred: Callable[[Any], bool], op: Hashable, reach: Mapping[int, frozenset[Any]] | None = None
    ) -> int:
        """Boolean: where *a*'s terminal satisfies *pred* (*op* names it in the memo). With
        *reach* (:meth:`reach` of *a*) a node whose terminals all agree is answered without
        being visited (a question about one backend of a hundred outcomes reads little)."""
        if reach is None:
            return self.apply1(("where", op), lambda v: bool(pred(v)), a)
        memo = self._memo1.setdefault(("where", op), {})
        # each terminal value asked once; then a node's terminals are judged with set operations
        wanted = frozenset(v for v in reach[a] if pred(v))
        return self._select(a, reach, partial(_among, wanted), memo)

    def among(self, a: int, values: frozenset[Any], reach: Mapping[int, frozenset[Any]]) -> int:
        """Boolean: where *a* gives one of *values*. *reach* is :meth:`reach` of *a*: a node
        that reaches none of them (or only them) is answered without being visited (one
        outcome of a hundred reads a small part of the diagram)."""
        return self._select(a, reach, partial(_among, values), {})

    def _select(
        self,
        a: int,
        reach: Mapping[int, frozenset[Any]],
        judge: Callable[[frozenset[Any]], int],
        memo: dict[int, int],
    ) -> int:
        """Boolean: where *a*'s terminal is selected; *judge* tells, for a set of terminal
        values, whether all are (1), none is (0) or some are (-1: read the children). A set is
        judged once, however many nodes reach it."""
        levels, kids_of, node, t, f = self._level, self._kids, self.node, self.true, self.false
        judged: dict[frozenset[Any], int] = {}  # a node's terminals -> true, false, or -1: read its children

        def go(n: int) -> int:
            values = reach[n]
            out = judged.get(values)
            if out is None:
                out = judged[values] = judge(values)
            if out == 1:
                out = t
            elif out == 0:
                out = f
            else:
                kids = []
                for k in kids_of[n]:
                    got = memo.get(k)
                    kids.append(go(k) if got is None else got)
                out = node(levels[n], kids)
            memo[n] = out
            return out

        hit = memo.get(a)
        return go(a) if hit is None else hit

    def any_of(self, nodes: Sequence[int]) -> int:
        out = self.false
        for n in nodes:
            out = self.OR(out, n)
        return out

    def intersects(self, a: int, b: int) -> bool:
        """Whether two boolean diagrams are both true in some cell (no node is made)."""
        seen: set[tuple[int, int]] = set()
        levels, kids = self._level, self._kids
        t, f, depth = self.true, self.false, self.depth

        def go(x: int, y: int) -> bool:
            if f in (x, y):
                return False
            if x == t:
                return y != f
            if y == t:
                return True
            if (x, y) in seen:
                return False
            seen.add((x, y))
            lx, ly = levels[x], levels[y]
            top = min(lx, ly)
            if top == depth:  # non-boolean terminals: read as their truth
                return bool(self._value[x]) and bool(self._value[y])
            kx = kids[x] if lx == top else (x,) * self.sizes[top]
            ky = kids[y] if ly == top else (y,) * self.sizes[top]
            return any(go(p, q) for p, q in zip(kx, ky, strict=True))

        return go(a, b)

    def meets(self, lits: Sequence[int]) -> bool:
        """Whether some cell gives every literal of *lits* its wanted value: a literal is a
        boolean diagram's node (wanted true) or its bitwise complement ``~n`` (wanted false).
        The diagrams are read together, depth first, and no node is made (a conjunction of
        many rule effects, built, is mostly thrown away)."""
        failed: set[tuple[int, ...]] = set()
        levels, sizes = self._level, self.sizes

        def go(state: tuple[int, ...]) -> bool:
            if state in failed:
                return False
            top = min(levels[x if x >= 0 else ~x] for x in state)
            for i in range(sizes[top]):
                child = self._step(state, top, i)
                if child is not None and (not child or go(child)):
                    return True
            failed.add(state)
            return False

        first = self._settle(tuple(lits))
        return first is not None and (not first or go(first))

    def count_all(self, lits: Sequence[int], fixed: Mapping[int, int] | None = None) -> int:
        """The cells where every literal of *lits* (see :meth:`meets`) has its wanted value,
        weighted as :meth:`count_by` counts (a level in *fixed* holds that one class), read
        without making the conjunction's nodes."""
        levels, depth = self._level, self.depth
        fixed = fixed or {}
        prefix = [1]
        for lv in range(depth):
            prefix.append(prefix[-1] * (1 if lv in fixed else sum(self.weights[lv])))
        memo: dict[tuple[int, ...], int] = {}

        def level(state: tuple[int, ...]) -> int:
            return min((levels[x if x >= 0 else ~x] for x in state), default=depth)

        def below(state: tuple[int, ...]) -> int:  # cells from the state's level down
            hit = memo.get(state)
            if hit is not None:
                return hit
            lv = level(state)
            classes = [(fixed[lv], 1)] if lv in fixed else enumerate(self.weights[lv])
            weight: dict[tuple[int, ...], int] = {}  # a child state reached by several classes is read once
            for i, w in classes:
                child = self._step(state, lv, i)
                if child is not None:
                    weight[child] = weight.get(child, 0) + w
            out = 0
            for child, w in weight.items():
                under = below(child) if child else 1
                out += w * (prefix[level(child)] // prefix[lv + 1]) * under
            memo[state] = out
            return out

        if len(lits) == 2 and min(lits) >= 0:
            return self._count_both(lits[0], lits[1], prefix, fixed)
        start = self._settle(tuple(lits))
        if start is None:
            return 0
        return prefix[level(start)] * (below(start) if start else 1)

    def _count_both(self, a: int, b: int, prefix: list[int], fixed: Mapping[int, int]) -> int:
        """:meth:`count_all` of two boolean diagrams wanted true (rule usage's overlaps: most of
        its questions), with pairs of nodes for states."""
        levels, kids_of, sizes, t, f = self._level, self._kids, self.sizes, self.true, self.false
        memo: dict[tuple[int, int], int] = {}

        def below(x: int, y: int) -> int:  # true cells from the pair's level down
            if f in (x, y):
                return 0
            if x == t and y == t:
                return 1
            hit = memo.get((x, y))
            if hit is not None:
                return hit
            lx, ly = levels[x], levels[y]
            lv = lx if lx < ly else ly
            kx = kids_of[x] if lx == lv else (x,) * sizes[lv]
            ky = kids_of[y] if ly == lv else (y,) * sizes[lv]
            weight: dict[tuple[int, int], int] = {}  # a child pair reached by several classes is read once
            if lv in fixed:
                weight[(kx[fixed[lv]], ky[fixed[lv]])] = 1
            else:
                for w, p, q in zip(self.weights[lv], kx, ky, strict=True):
                    if f not in (p, q):
                        weight[(p, q)] = weight.get((p, q), 0) + w
            out = 0
            for (p, q), w in weight.items():
                low = min(levels[p], levels[q])
                out += w * (prefix[low] // prefix[lv + 1]) * below(p, q)
            memo[(x, y)] = out
            return out

        top = min(levels[a], levels[b])
        return prefix[top] * below(a, b)

    def _step(self, state: tuple[int, ...], level: int, i: int) -> tuple[int, ...] | None:
        """The literals of *state* with *level* fixed to class *i* (see :meth:`_settle`)."""
        levels, kids_of = self._level, self._kids
        out = []
        for x in state:
            if x >= 0:
                out.append(kids_of[x][i] if levels[x] == level else x)
            else:
                n = ~x
                out.append(~kids_of[n][i] if levels[n] == level else x)
        return self._settle(tuple(out))

    def _settle(self, state: tuple[int, ...]) -> tuple[int, ...] | None:
        """*state* less the literals a terminal satisfies; ``None`` if a terminal denies one."""
        t, f = self.true, self.false
        if t not in state and f not in state and ~t not in state and ~f not in state:
            return state
        out = []
        for x in state:
            if x in (t, ~f):
                continue
            if x in (f, ~t):
                return None
            out.append(x)
        return tuple(out)

    # -- questions

    def terminals(self, n: int) -> set[Any]:
        """Every terminal value *n* reaches."""
        out: set[Any] = set()
        for m in self.reachable(n):
            if self._level[m] == self.depth:
                out.add(self._value[m])
        return out

    def reachable(self, n: int) -> list[int]:
        """The nodes of *n*'s diagram, *n* first."""
        seen = {n}
        todo = [n]
        out = []
        while todo:
            m = todo.pop()
            out.append(m)
            for k in self._kids[m]:
                if k not in seen:
                    seen.add(k)
                    todo.append(k)
        return out

    def size(self, n: int) -> int:
        """The number of nodes of *n*'s diagram."""
        return len(self.reachable(n))

    def span(self, lo: int, hi: int, fixed: Mapping[int, int] | None = None) -> int:
        """The cells of the levels from *lo* up to (not including) *hi*; a level in *fixed*
        counts once (it holds one class there)."""
        total = 1
        for lv in range(lo, hi):
            if fixed is None or lv not in fixed:
                total *= sum(self.weights[lv])
        return total

    def count(self, n: int, fixed: Mapping[int, int] | None = None) -> int:
        """The cells where boolean *n* is true (see :meth:`count_by`; one int per node, not a
        count per terminal value)."""
        levels, depth, kids_of, t, f = self._level, self.depth, self._kids, self.true, self.false
        fixed = fixed or {}
        prefix = [1]
        for lv in range(depth):
            prefix.append(prefix[-1] * (1 if lv in fixed else sum(self.weights[lv])))
        memo: dict[int, int] = {t: 1, f: 0}

        def below(m: int) -> int:  # true cells from m's level down
            hit = memo.get(m)
            if hit is not None:
                return hit
            lv = levels[m]
            if lv == depth:  # a terminal other than true
                return 0
            kids = kids_of[m]
            weight: dict[int, int] = {}  # a child reached by several classes is read once
            if lv in fixed:
                weight[kids[fixed[lv]]] = 1
            else:
                for w, k in zip(self.weights[lv], kids, strict=True):
                    weight[k] = weight.get(k, 0) + w
            out = 0
            for k, w in weight.items():
                if k != f:
                    out += w * (prefix[levels[k]] // prefix[lv + 1]) * below(k)
            memo[m] = out
            return out

        if levels[n] == depth:
            return prefix[depth] if n == t else 0
        return prefix[levels[n]] * below(n)

    def count_by(self, n: int, fixed: Mapping[int, int] | None = None) -> dict[Any, int]:
        """The cells of each terminal value of *n*, weighted by the classes' weights. A level
        in *fixed* (level -> class) holds that one class and counts once: the levels a kind of
        cell does not have (the facts only MoE models have, for a dense model)."""
        memo: dict[int, dict[Any, int]] = {}
        levels, depth, kids = self._level, self.depth, self._kids
        fixed = fixed or {}
        prefix = [1]  # prefix[i]: the cells of the levels above i
        for lv in range(depth):
            prefix.append(prefix[-1] * (1 if lv in fixed else sum(self.weights[lv])))

        def below(m: int) -> dict[Any, int]:  # cells from m's level down
            hit = memo.get(m)
            if hit is not None:
                return hit
            lv = levels[m]
            out: dict[Any, int] = {}
            if lv == depth:
                out[self._value[m]] = 1
            else:
                weight: dict[int, int] = {}  # a child reached by several classes is read once
                if lv in fixed:
                    weight[kids[m][fixed[lv]]] = 1
                else:
                    for w, k in zip(self.weights[lv], kids[m], strict=True):
                        weight[k] = weight.get(k, 0) + w
                for k, w in weight.items():
                    factor = w * (prefix[levels[k]] // prefix[lv + 1])
                    for v, c in below(k).items():
                        out[v] = out.get(v, 0) + factor * c
            memo[m] = out
            return out

        top = prefix[levels[n]]
        return {v: c * top for v, c in below(n).items()}

    def cubes(
        self, n: int, pred: Callable[[Any], bool], limit: int | None = None
    ) -> Iterator[tuple[dict[int, tuple[int, ...]], Any]]:
        """Disjoint boxes covering the cells whose terminal satisfies *pred*: each a mapping of
        the levels it fixes to the classes it holds there (a level left out holds every class),
        and its terminal value. Classes of one node that lead to one child are one box."""
        levels, depth = self._level, self.depth
        dead: dict[int, bool] = {}

        def empty(m: int) -> bool:
            hit = dead.get(m)
            if hit is None:
                hit = pred(self._value[m]) is False if levels[m] == depth else all(map(empty, set(self._kids[m])))
                dead[m] = hit
            return hit

        out = 0
        stack: list[tuple[int, dict[int, tuple[int, ...]]]] = [(n, {})]
        while stack:
            m, fixed = stack.pop()
            if empty(m):
                continue
            if levels[m] == depth:
                yield fixed, self._value[m]
                out += 1
                if limit is not None and out >= limit:
                    return
                continue
            for k, idx in reversed(_by_kid(self._kids[m]).items()):
                stack.append((k, {**fixed, levels[m]: idx}))

    def largest_cubes(
        self, n: int, pred: Callable[[Any], bool], limit: int
    ) -> Iterator[tuple[dict[int, tuple[int, ...]], Any]]:
        """The boxes of :meth:`cubes`, the largest first (by weighted cells; ties in a fixed
        order), at most *limit*: a best-first search whose bound is the largest box below each
        node, so only the boxes yielded and the nodes on their way are visited (``diff`` shows
        the largest few of millions)."""
        levels, depth, kids_of, weights = self._level, self.depth, self._kids, self.weights
        full = [math.log(sum(ws)) for ws in weights]
        best: dict[int, float] = {}  # log of the largest box's share of the cells below a node

        def bound(m: int) -> float:
            hit = best.get(m)
            if hit is None:
                if levels[m] == depth:
                    hit = 0.0 if pred(self._value[m]) else -math.inf
                else:
                    hit = max(
                        (math.log(sum(weights[levels[m]][i] for i in idx)) - full[levels[m]] + bound(k))
                        for k, idx in _by_kid(kids_of[m]).items()
                    )
                best[m] = hit
            return hit

        seq = itertools.count()
        heap: list[tuple[float, int, int, float, dict[int, tuple[int, ...]]]] = []
        if bound(n) > -math.inf:
            heap.append((-bound(n), next(seq), n, 0.0, {}))
        out = 0
        while heap and out < limit:
            _, _, m, acc, fixed = heapq.heappop(heap)
            if levels[m] == depth:
                yield fixed, self._value[m]
                out += 1
                continue
            lv = levels[m]
            for k, idx in _by_kid(kids_of[m]).items():
                b = bound(k)
                if b == -math.inf:
                    continue
                share = acc + math.log(sum(weights[lv][i] for i in idx)) - full[lv]
                heapq.heappush(heap, (-(share + b), next(seq), k, share, {**fixed, lv: idx}))

    def count_cubes(self, n: int, pred: Callable[[Any], bool]) -> int:
        """How many boxes :meth:`cubes` yields (without listing them)."""
        memo: dict[int, int] = {}
        levels, depth = self._level, self.depth

        def go(m: int) -> int:
            hit = memo.get(m)
            if hit is None:
                if levels[m] == depth:
                    hit = 1 if pred(self._value[m]) else 0
                else:
                    hit = sum(go(k) for k in set(self._kids[m]))
                memo[m] = hit
            return hit

        return go(n)

    def witness(
        self,
        n: int,
        pred: Callable[[Any], bool],
        prefer: Mapping[int, int] | None = None,
        reach: Mapping[int, frozenset[Any]] | None = None,
    ) -> dict[int, int] | None:
        """One cell (a class per level) whose terminal satisfies *pred*, ``None`` if none: each
        level takes the class in *prefer* where that class leads there, else the first that does.
        *reach* (:meth:`reach` of *n*) makes many questions about one diagram cheap."""
        levels, depth = self._level, self.depth
        prefer = prefer or {}
        ok: dict[int, bool] = {}
        by_set: dict[int, bool] = {}

        def some(m: int) -> bool:
            hit = ok.get(m)
            if hit is None:
                if reach is not None:
                    values = reach[m]
                    hit = by_set.get(id(values))
                    if hit is None:
                        hit = by_set[id(values)] = any(map(pred, values))
                elif levels[m] == depth:
                    hit = bool(pred(self._value[m]))
                else:
                    hit = any(map(some, set(self._kids[m])))
                ok[m] = hit
            return hit

        if not some(n):
            return None
        cell: dict[int, int] = {}
        m = n
        while levels[m] != depth:
            kids = self._kids[m]
            want = prefer.get(levels[m])
            i = want if want is not None and some(kids[want]) else next(i for i, k in enumerate(kids) if some(k))
            cell[levels[m]] = i
            m = kids[i]
        return {lv: cell.get(lv, prefer.get(lv, 0)) for lv in range(depth)}

    def reach(self, n: int) -> dict[int, frozenset[Any]]:
        """For every node of *n*'s diagram, the terminal values it reaches (equal sets shared)."""
        levels, depth = self._level, self.depth
        out: dict[int, frozenset[Any]] = {}
        shared: dict[frozenset[Any], frozenset[Any]] = {}
        for m in reversed(self.reachable_ordered(n)):
            if levels[m] == depth:
                found = frozenset({self._value[m]})
            else:
                found = frozenset().union(*(out[k] for k in set(self._kids[m])))
            out[m] = shared.setdefault(found, found)
        return out

    def reachable_ordered(self, n: int) -> list[int]:
        """The nodes of *n*'s diagram, every node before its children."""
        return self._children_first([n])[::-1]

    def _children_first(self, roots: Iterable[int]) -> list[int]:
        """The nodes below *roots* (each once), every node after its children."""
        post: list[int] = []
        seen: set[int] = set()
        for r in roots:
            stack = [(r, False)]
            while stack:
                m, done = stack.pop()
                if done:
                    post.append(m)
                    continue
                if m in seen:
                    continue
                seen.add(m)
                stack.append((m, True))
                stack.extend((k, False) for k in self._kids[m] if k not in seen)
        return post

    def evaluate(self, n: int, cell: Mapping[int, int]) -> Any:
        """The terminal value of *n* at *cell* (a class index per level)."""
        while self._level[n] != self.depth:
            n = self._kids[n][cell[self._level[n]]]
        return self._value[n]

    # -- keeping diagrams

    def export(self, roots: Mapping[str, int]) -> dict[str, Any]:
        """*roots*' diagrams as plain data: the nodes below them (children before parents),
        terminal values by index, and each root's index (see :meth:`load`)."""
        order = self._children_first(roots.values())
        index = {m: i for i, m in enumerate(order)}
        nodes = [
            ["t", self._value[m]]
            if self._level[m] == self.depth
            else [self._level[m], [index[k] for k in self._kids[m]]]
            for m in order
        ]
        return {"sizes": list(self.sizes), "nodes": nodes, "roots": {k: index[r] for k, r in roots.items()}}

    def load(self, data: Mapping[str, Any], value: Callable[[Any], Hashable] = lambda v: v) -> dict[str, int]:
        """The roots of :meth:`export`'s data, made in this manager; the structure is checked
        (levels increase from a node to its children, one child per class, children first).

        :raises ValueError: naming what is wrong.
        """
        if list(data.get("sizes", ())) != list(self.sizes):
            raise ValueError("the diagram's levels are not this manager's")
        made: list[int] = []
        for i, item in enumerate(data.get("nodes", ())):
            if not isinstance(item, list) or len(item) != 2:
                raise ValueError(f"node {i} is not a pair")
            if item[0] == "t":
                made.append(self.term(value(item[1])))
                continue
            level, kids = item
            if not isinstance(level, int) or not 0 <= level < self.depth:
                raise ValueError(f"node {i} has no level of this manager")
            if not isinstance(kids, list) or len(kids) != self.sizes[level]:
                raise ValueError(f"node {i} has not one child per class")
            for k in kids:
                if not isinstance(k, int) or not 0 <= k < i:
                    raise ValueError(f"node {i} names a child not before it")
                if self._level[made[k]] <= level:
                    raise ValueError(f"node {i} has a child at its own level or above")
            made.append(self.node(level, [made[k] for k in kids]))
        roots = {}
        for name, r in dict(data.get("roots", {})).items():
            if not isinstance(r, int) or not 0 <= r < len(made):
                raise ValueError(f"root `{name}` names no node")
            roots[str(name)] = made[r]
        return roots


def _among(wanted: frozenset[Any], values: frozenset[Any]) -> int:
    """:meth:`Manager._select`'s judge of a set of terminal values for :meth:`Manager.among`
    and :meth:`Manager.where` (set operations: a diagram of thousands of outcomes judges each set
    in the time of a few)."""
    if values.isdisjoint(wanted):
        return 0
    return 1 if values <= wanted else -1


def _by_kid(kids: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """The classes of a node that lead to each child, in class order."""
    out: dict[int, list[int]] = {}
    for i, k in enumerate(kids):
        out.setdefault(k, []).append(i)
    return {k: tuple(idx) for k, idx in out.items()}
