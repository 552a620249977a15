"""Compile rule and policy files into a :class:`~kernelpolicy.policy.Policy` (no caching).

A :class:`Compiler` makes one pass over every file: each is read, checked for structure and
meaning, and compiled, one method per section. Every problem found in any file is collected,
field errors and meaning errors together (an entry with a bad field is still checked for
misspelt fact keys and backend ids in its other fields), and one
:class:`~kernelpolicy.errors.PolicyError` reports them all, each with its file, line and column.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from ..errors import Diagnostic, FactError, PolicyError, did_you_mean
from ..facts.gpu import GpuProduct
from ..facts.keys import BACKENDS, ENV_PREFIX, GPU_SMS, PATHS
from ..facts.model import CatalogModel, parse_catalog
from ..facts.record import normalise_value
from ..policy import Backend, EngineMap, FixEvidence, Implication, Order, Origin, Policy, Rule, Unsupported
from ._source import SourceError, SourceFile, decode
from ._yaml import Located, YamlError, load_located
from .conditions import TRUE, All, Any_, Condition, ConditionError, Test, parse_condition, parse_test
from .schema import (
    BackendSpec,
    EngineSpec,
    GpuSpec,
    ImplySpec,
    ModelSpec,
    OrderSpec,
    RuleFileSpec,
    RuleSpec,
    UnsupportedSpec,
)

__all__ = ["Compiler", "compile_files", "compile_sources"]

Where = tuple[str | int, ...]

_SECTIONS: Final[dict[str, type[BaseModel]]] = {
    "backends": BackendSpec,
    "order": OrderSpec,
    "rules": RuleSpec,
    "implies": ImplySpec,
    "unsupported": UnsupportedSpec,
    "models": ModelSpec,
    "gpus": GpuSpec,
}
_SECTION_NAMES: Final = (*_SECTIONS, "engine")
#: The errors one file reports before the rest of its entries go unchecked (each costs a
#: validation and a diagnostic: a 900 kB one-line file of 300,000 bad entries took 5-13 s).
MAX_FILE_ERRORS: Final = 5_000
#: Sections whose entries are checked for meaning even when a field failed its schema.
_PARTIAL: Final = frozenset({"backends", "order", "rules", "implies", "unsupported"})
_FIELD_NAMES: Final = {
    "backends": ("backend", "paths", "requires", "warmup", "because", "refs"),
    "rules": tuple(RuleSpec.model_fields),
}
_ALL_IDS: Final = sorted({b for bs in BACKENDS.values() for b in bs})
_EFFECTS: Final = ("deny", "prefer", "require", "use")
#: How YAML 1.1 spells booleans besides true/false (PyYAML reads them all as booleans).
_YAML11_TRUE: Final = frozenset({"yes", "on", "y"})
_YAML11_FALSE: Final = frozenset({"no", "off", "n"})


@dataclass(frozen=True)
class _File:
    """One file that parsed: its source, its positions, its sections, and the entries whose
    listed fields failed their schema (those fields are left out; the entry is not compiled)."""

    src: SourceFile
    loc: Located
    spec: RuleFileSpec
    bad: dict[Where, frozenset[str]] = field(default_factory=dict)
    #: section -> the index in the file of each loaded entry (absent: every entry loaded)
    index: dict[str, list[int]] = field(default_factory=dict)

    def partial(self, where: Where) -> frozenset[str] | None:
        return self.bad.get(where)

    def entries(self, section: str) -> list[tuple[int, Any]]:
        """``(index in the file, entry)`` of each entry of *section* that loaded (an entry that is
        not a mapping is left out, so the index keeps errors on the right line); those in
        :attr:`bad` may have ``None`` for required fields."""
        items: list[Any] = getattr(self.spec, section)
        index = self.index.get(section)
        return list(zip(index, items, strict=True)) if index is not None else list(enumerate(items))


def _fix_evidence(r: RuleSpec) -> tuple[FixEvidence, ...] | None:
    """A rule's ``fix`` (its schema checked each alternative names one signature, all of one
    package) as the policy holds it: the alternatives in order."""
    if r.fix is None:
        return None
    out: list[FixEvidence] = []
    for spec in r.fix:
        for kind in ("contains", "matches", "symbol"):
            pattern = getattr(spec, kind)
            if pattern is not None:
                ev = FixEvidence(spec.package, spec.file, kind, pattern)
                if ev not in out:
                    out.append(ev)
    return tuple(out) or None


def _rule_id_at(loc: Located, path: Where) -> str | None:
    if len(path) >= 2 and isinstance(path[1], int):
        try:
            item = loc.data[path[0]][path[1]]
        except (KeyError, IndexError, TypeError):
            return None
        if isinstance(item, dict):
            rid = item.get("id") or item.get("backend") or item.get("name")
            return str(rid) if rid is not None else None
    return None


class Compiler:
    """Compiles rule files in one pass; :meth:`compile` returns the policy or raises one
    :class:`PolicyError` with every problem of every file."""

    def __init__(self) -> None:
        self.diags: list[Diagnostic] = []
        self._said: set[Diagnostic] = set()  #: what :meth:`add` reported (a list scan was quadratic)
        self._errors: dict[str, int] = {}  #: errors reported per file (see :data:`MAX_FILE_ERRORS`)
        self.files: list[_File] = []
        self.broken = False  #: a file or catalog entry did not load: no reference errors from it
        self.digest = hashlib.sha256()
        self.names: list[str] = []
        self.backends: dict[str, dict[str, Backend]] = {p: {} for p in PATHS if p != "warmup"}
        self.orders: dict[str, list[Order]] = {p: [] for p in self.backends}
        self.rules: list[Rule] = []
        self.implications: list[Implication] = []
        self.unsupported: list[Unsupported] = []
        self.models: list[CatalogModel] = []
        self.gpus: list[GpuProduct] = []
        #: catalog names (folded) -> the file that defined them: defined once, as rule ids
        self.gpu_names: dict[str, str] = {}
        self.model_ids: dict[str, str] = {}
        self.engine_names: dict[str, str] = {}
        self.engines: dict[str, EngineMap] = {}
        self.seen_ids: dict[str, str] = {}
        self.partial_ids: set[str] = set()  #: ids of entries not compiled because of a field error
        #: shipped orders and ``prefer`` rules whose ``when`` names no engine (see :meth:`_engineless`)
        self.engineless: list[tuple[_File, Where, str | None, str]] = []

    # ------------------------------------------------------------------ the pass

    def compile(self, sources: Iterable[tuple[SourceFile, bytes | Diagnostic]]) -> Policy:
        for src, data in sources:
            self.read(src, data)
        for f in self.files:
            self.catalog(f)
        for f in self.files:
            self.order_section(f)
            self.rule_section(f)
            self.implies_section(f)
            self.unsupported_section(f)
            self.model_section(f)
            self.gpu_section(f)
            self.engine_section(f)
        self._engineless()
        self.check_overrides()
        if any(d.level == "error" for d in self.diags):
            raise PolicyError(self.diags)
        by_id = {r.id: r for r in self.rules}
        return Policy(
            backends=self.backends,
            orders={p: tuple(v) for p, v in self.orders.items()},
            rules=tuple(self.rules),
            implications=tuple(self.implications),
            models=tuple(self.models),
            gpus=tuple(self.gpus),
            engines=self.engines,
            files=tuple(self.names),
            digest="sha256:" + self.digest.hexdigest(),
            warnings=tuple(self.diags),
            by_id=by_id,
            unsupported=tuple(self.unsupported),
        )

    # ------------------------------------------------------------------ diagnostics

    def add(self, f: _File, path: Where, message: str, *, key: bool = False, **info: Any) -> None:
        """Report *message* at *path* of *f* (its key with *key*); *info*: the
        :class:`Diagnostic`'s ``rule``, ``help``, ``level`` and ``code``."""
        line, col, width = f.loc.where(path, key=key)
        info.setdefault("code", "schema")
        diag = Diagnostic(
            message, file=f.src.display, line=line, column=col, source_line=f.loc.line_text(line), span=width, **info
        )
        if diag not in self._said:  # one condition compiled for each path of a backend says it once
            self._said.add(diag)
            if diag.level == "error":
                self._errors[diag.file] = self._errors.get(diag.file, 0) + 1
            self.diags.append(diag)

    def _pydantic(self, exc: ValidationError, f: _File, prefix: Where) -> None:
        for err in exc.errors():
            path = prefix + tuple(err["loc"])
            # drop union-branch labels pydantic appends (e.g. `str`, `list[str]`)
            while path and isinstance(path[-1], str) and ("[" in path[-1] or path[-1] in ("str", "int", "bool")):
                path = path[:-1]
            name = path[-1] if path else ""
            rule_id = _rule_id_at(f.loc, path)
            typ = err["type"]
            if typ == "extra_forbidden":
                known = _FIELD_NAMES.get(str(path[0]) if path else "", ())
                hint = did_you_mean(str(name), known) if known else []
                self.add(
                    f,
                    path,
                    f"unknown field `{name}`",
                    help=f"did you mean `{hint[0]}`?" if hint else None,
                    rule=rule_id,
                    key=True,
                )
            elif typ == "missing":
                self.add(f, path[:-1], f"missing field `{name}`", rule=rule_id)
            else:
                msg = err["msg"].removeprefix("Value error, ")  # a validator's own sentence
                where = ".".join(str(p) for p in path[2:]) or str(name)
                self.add(f, path, f"`{where}`: {msg[:1].lower() + msg[1:]}", rule=rule_id)

    def cond(self, f: _File, data: Any, path: Where, rule: str | None) -> Condition | None:
        """A condition, or ``None`` (reported) when it does not parse; YAML 1.1 booleans given
        to environment variables are warnings."""
        if data is None:
            return TRUE
        try:
            parsed = parse_condition(data)
        except ConditionError as exc:
            self.add(
                f,
                (*path, *exc.path),
                exc.message,
                help=exc.help,
                rule=rule,
                key=bool(exc.path) and "unknown fact key" in exc.message,
            )
            return None
        self._yaml11_env_booleans(f, data, path, rule)
        return parsed

    def _yaml11_env_booleans(self, f: _File, data: Any, path: Where, rule: str | None) -> None:
        """Warn where an environment variable is compared with ``on``/``off``/``yes``/``no``:
        YAML 1.1 reads those as booleans, which compare as the strings ``true``/``false``."""
        if not isinstance(data, dict):
            return
        for key, value in data.items():
            here = (*path, key)
            if key in ("all", "any") and isinstance(value, list):
                for i, c in enumerate(value):
                    self._yaml11_env_booleans(f, c, (*here, i), rule)
            elif key == "not":
                self._yaml11_env_booleans(f, value, here, rule)
            elif str(key).startswith(ENV_PREFIX):
                values: list[tuple[int | None, Any]] = (
                    list(enumerate(value)) if isinstance(value, list) else [(None, value)]
                )
                for j, v in values:
                    if isinstance(v, bool):
                        self._warn_yaml11(f, here if j is None else (*here, j), str(key), v, rule)

    def _warn_yaml11(self, f: _File, where: Where, key: str, value: bool, rule: str | None) -> None:
        line, col, width = f.loc.where(where)
        text = (f.loc.line_text(line) or "")[col - 1 : col - 1 + width].strip().strip("\"'")
        if text.lower() not in (_YAML11_TRUE | _YAML11_FALSE):
            return  # true/false as written: meant as a boolean
        as_str = "true" if value else "false"
        self.add(
            f,
            where,
            f"`{text}` is a YAML 1.1 boolean: `{key}` is compared with the string `{as_str}`",
            help=f'quote it (`"{text}"`) to compare with `{text}`',
            rule=rule,
            level="warning",
            code="yaml-boolean",
        )

    # ------------------------------------------------------------------ reading and structure

    def read(self, src: SourceFile, data: bytes | Diagnostic) -> None:
        """Parse one file and check each entry's fields (its meaning is checked later)."""
        if isinstance(data, Diagnostic):
            self.diags.append(data)
            return
        try:
            text = decode(data, src.display)
        except SourceError as exc:
            self.diags.append(exc.diagnostic)
            return
        self.digest.update(f"{src.layer}\0{src.display}\0".encode() + text.encode("utf-8") + b"\0")
        self.names.append(src.display)
        try:
            loc = _parsed(text, src.display)
        except YamlError as exc:
            self.diags.append(exc.diagnostic)
            self.broken = True
            return
        if loc.data is None:
            return
        f = _File(src, loc, RuleFileSpec())
        if not isinstance(loc.data, dict):
            self.add(f, (), "a rule file must be a mapping of sections", help="sections: " + ", ".join(_SECTION_NAMES))
            return
        self.files.append(self._structure(f))

    def _enough(self, f: _File, where: Where, left: int, what: str) -> bool:
        """Whether *f* already has :data:`MAX_FILE_ERRORS` errors; then the *left* entries not
        checked (of *what*) are said once, at *where*."""
        if self._errors.get(f.src.display, 0) < MAX_FILE_ERRORS:
            return False
        self.add(f, where, f"{left:,} more {what} not checked: the file has {MAX_FILE_ERRORS} errors already")
        return True

    def _structure(self, f: _File) -> _File:
        """Validate each entry on its own, so one bad entry hides no problem in the others (up
        to :data:`MAX_FILE_ERRORS` errors a file: 300,000 bad entries took seconds to refuse)."""
        sections: dict[str, Any] = {}
        bad: dict[Where, frozenset[str]] = {}
        index: dict[str, list[int]] = {}
        names = list(f.loc.data)
        for at, (name, value) in enumerate(f.loc.data.items()):
            if self._enough(f, (name,), len(names) - at, "sections"):
                break
            if name == "engine":
                try:
                    sections["engine"] = EngineSpec.model_validate(value)
                except ValidationError as exc:
                    self._pydantic(exc, f, ("engine",))
                continue
            model = _SECTIONS.get(name)
            if model is None:
                hint = did_you_mean(str(name), _SECTION_NAMES)
                self.add(
                    f,
                    (name,),
                    f"unknown section `{name}`",
                    key=True,
                    help=f"did you mean `{hint[0]}`?" if hint else "sections: " + ", ".join(_SECTION_NAMES),
                )
                continue
            if not isinstance(value, list):
                self.add(f, (name,), f"section `{name}` must be a list")
                continue
            items = []
            index[name] = []
            for i, item in enumerate(value):
                if self._enough(f, (name, i), len(value) - i, f"entries of `{name}`"):
                    break
                try:
                    items.append(model.model_validate(item))
                    index[name].append(i)
                except ValidationError as exc:
                    self._pydantic(exc, f, (name, i))
                    part = self._partial(model, item, exc) if name in _PARTIAL else None
                    if part is not None:
                        items.append(part[0])
                        index[name].append(i)
                        bad[(name, i)] = part[1]
                    if name == "backends":
                        self.broken = True  # the catalog lacks an entry: no cascade of "no backend"
            sections[name] = items
        spec = RuleFileSpec.model_construct(**{**RuleFileSpec().model_dump(), **sections})
        return _File(f.src, f.loc, spec, bad, index)

    @staticmethod
    def _partial(model: type[BaseModel], item: Any, exc: ValidationError) -> tuple[Any, frozenset[str]] | None:
        """*item* without its fields that failed, the required ones among them ``None``, and
        the names of the fields left out; ``None`` when it is not a mapping."""
        if not isinstance(item, dict):
            return None
        failed = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        kept = {k: v for k, v in item.items() if k not in failed and k in model.model_fields}
        absent = {n for n, fi in model.model_fields.items() if fi.is_required() and n not in kept}
        return model.model_construct(**kept, **dict.fromkeys(absent)), frozenset(failed | absent)

    # ------------------------------------------------------------------ sections

    def catalog(self, f: _File) -> None:
        """``backends``: what exists on each path and what it needs."""
        for i, b in f.entries("backends"):
            here: Where = ("backends", i)
            if f.partial(here) is not None:
                if b.requires is not None:
                    self.cond(f, b.requires, (*here, "requires"), b.backend)
                continue
            for path in b.paths:
                self._catalog_entry(f, b, path, here)

    def _catalog_entry(self, f: _File, b: BackendSpec, path: str, here: Where) -> None:
        if path == "warmup":
            self.add(f, (*here, "paths"), "`warmup` is derived: mark a backend `warmup: true` instead", rule=b.backend)
            return
        if b.backend not in BACKENDS[path]:
            hint = did_you_mean(b.backend, BACKENDS[path])
            self.add(
                f,
                (*here, "backend"),
                f"`{b.backend}` is not a backend id of path `{path}`",
                help=f"did you mean `{hint[0]}`?" if hint else "ids: " + ", ".join(BACKENDS[path]),
                rule=b.backend,
            )
            return
        if b.backend in self.backends[path]:
            self.add(
                f,
                (*here, "backend"),
                f"`{b.backend}` is declared twice on path `{path}`",
                rule=b.backend,
                code="duplicate",
            )
            return
        cond = self.cond(f, b.requires, (*here, "requires"), b.backend)
        if cond is None:
            return
        self.backends[path][b.backend] = Backend(
            b.backend,
            path,
            cond,
            b.warmup,
            b.because,
            tuple(b.refs),
            Origin(f.src.display, f.loc.where(here)[0], f.src.layer),
            b.auto,
        )

    def _exists(self, backend: str, path: str) -> bool:
        if path == "warmup":
            return any(e.warmup for entries in self.backends.values() for k, e in entries.items() if k == backend)
        return backend in self.backends.get(path, {})

    def check_backends(
        self, f: _File, names: Sequence[str], paths: Sequence[str] | None, where: Where, rid: str | None
    ) -> bool:
        """Whether every backend of *names* exists on *paths* (every path it is on if ``None``)."""
        ok = True
        for n in names:
            if self.broken and n in _ALL_IDS:
                continue  # its catalog entry may be in the file that did not load
            scope = list(paths) if paths else [p for p in self.backends if n in self.backends[p]]
            if not scope:
                hint = [h for h in did_you_mean(n, _ALL_IDS) if h != n]
                self.add(
                    f,
                    where,
                    f"no path has a backend `{n}`" + (" in the catalog" if n in _ALL_IDS else ""),
                    help=f"did you mean `{hint[0]}`?" if hint else None,
                    rule=rid,
                )
                ok = False
            for p in scope:
                if not self._exists(n, p):
                    self.add(f, where, f"backend `{n}` does not exist on path `{p}`", rule=rid)
                    ok = False
        return ok

    def claim(self, f: _File, rid: str | None, where: Where) -> None:
        """Record a rule id, reporting a duplicate (ids are unique across all files)."""
        if rid is None:
            return
        if rid in self.seen_ids:
            self.add(f, where, f"duplicate rule id `{rid}` (first in {self.seen_ids[rid]})", rule=rid, code="duplicate")
        else:
            self.seen_ids[rid] = f"{f.src.display}:{f.loc.where(where)[0]}"

    def _origin(self, f: _File, here: Where, layer: Any = None) -> Origin:
        return Origin(f.src.display, f.loc.where(here)[0], layer or f.src.layer)

    def order_section(self, f: _File) -> None:
        """``order``: the default priority of a path's backends."""
        for i, o in f.entries("order"):
            here: Where = ("order", i)
            bad = f.partial(here)
            self.claim(f, o.id, (*here, "id"))
            cond = self.cond(f, o.when, (*here, "when"), o.id)
            if o.path is None or o.backends is None:
                continue
            if cond is not None and not bad:
                self._names_engine(f, cond, here, o.id, "an `order` entry")
            if self.check_backends(f, o.backends, [o.path], (*here, "backends"), o.id) and cond is not None and not bad:
                self.orders[o.path].append(Order(o.id, o.path, cond, tuple(o.backends), self._origin(f, here)))

    def rule_section(self, f: _File) -> None:
        """``rules``: deny, prefer, require and (operator policies only) use."""
        for i, r in f.entries("rules"):
            bad = f.partial(("rules", i))
            rule = self.rule(f, r, i, bad or frozenset())
            if bad is not None:
                if r.id is not None:
                    self.partial_ids.add(r.id)
                continue
            if rule is not None:
                self.claim(f, r.id, ("rules", i, "id"))
                self.rules.append(rule)

    def rule(self, f: _File, r: RuleSpec, i: int, bad: frozenset[str]) -> Rule | None:
        """Check one rule entry; the compiled rule, or ``None`` when it has a problem.

        An entry with a field that failed its schema (*bad*) is checked only for what its other
        fields say (fact keys, backend ids): its shape is not, as a missing field may be the
        misspelt one, whose own error says so.
        """
        here: Where = ("rules", i)
        effects = [k for k in _EFFECTS if getattr(r, k) is not None]
        if len(effects) != 1:
            if not bad:
                self.add(
                    f,
                    here,
                    "a rule needs exactly one effect: `deny`, `prefer`, `require` or `use`"
                    + (f" (it has {', '.join(effects)})" if effects else ""),
                    rule=r.id,
                )
            self.cond(f, r.when, (*here, "when"), r.id)
            return None
        kind = effects[0]
        # an entry with a field error: its own error says it; a missing field may be that one misspelt
        ok = not bad and self._rule_shape(f, r, here, kind)
        targets = self._targets(r, kind)
        paths = tuple(r.paths) if r.paths else None
        if targets and not self.check_backends(f, targets, paths, (*here, kind), r.id):
            ok = False
        when = self.cond(f, r.when, (*here, "when"), r.id)
        until = self.cond(f, r.until, (*here, "until"), r.id) if r.until is not None else None
        require = self.cond(f, r.require, (*here, "require"), r.id) if r.require is not None else TRUE
        if not ok or bad or when is None or require is None or (r.until is not None and until is None):
            return None
        if kind == "prefer":
            self._names_engine(f, when, here, r.id, "a `prefer` rule")
        return Rule(
            id=r.id,
            kind=kind,  # type: ignore[arg-type]
            when=when,
            backends=targets,
            paths=paths,
            severity=r.severity or ("user" if kind == "use" else "perf"),
            because=r.because,
            origin=self._origin(f, here),
            require=require,
            help=r.help,
            refs=tuple(r.refs),
            until=until,
            overrides=tuple(r.overrides),
            fix=_fix_evidence(r),
        )

    def _names_engine(self, f: _File, when: Condition, here: Where, rid: str | None, what: str) -> None:
        """Note a shipped order or preference whose ``when`` does not test ``deploy.engine``."""
        if f.src.layer == "shipped" and not _tests_engine(when):
            self.engineless.append((f, here, rid, what))

    def _engineless(self) -> None:
        """Where the shipped tables speak for several engines, an order or a preference holds for
        the engine whose code or measurement it was read from, so its ``when`` must name it. (An
        operator's policy layer, written for its own fleet, may leave it out.)"""
        if len(self.engines) < 2:
            return
        names = ", ".join(f"`{n}`" for n in sorted(self.engines))
        for f, here, rid, what in self.engineless:
            self.add(
                f,
                (*here, "when"),
                f"{what} without an engine: its `when` must test `deploy.engine` (the tables speak for {names};"
                " one engine's order does not hold for another)",
                help="add `deploy.engine: vllm` (or `sglang`, or both as a list) to its `when`",
                rule=rid,
            )

    @staticmethod
    def _targets(r: RuleSpec, kind: str) -> tuple[str, ...]:
        if kind == "deny":
            return (r.deny,) if isinstance(r.deny, str) else tuple(r.deny or ())
        if kind == "prefer":
            return tuple(r.prefer or ())
        if kind == "use":
            return (r.use,) if r.use else ()
        return (r.backend,) if isinstance(r.backend, str) else tuple(r.backend or ())

    def _rule_shape(self, f: _File, r: RuleSpec, here: Where, kind: str) -> bool:
        """The fields a rule of *kind* must and must not have."""
        problems: list[tuple[Where, str]] = []
        if kind == "prefer" and not r.paths:
            problems.append(((*here, "prefer"), "a `prefer` rule must name its `paths`"))
        if kind == "use" and f.src.layer == "shipped":
            problems.append(((*here, "use"), "`use` is an operator's choice: put it in a policy file, not in rules/"))
        if kind == "require" and not self._targets(r, kind):
            problems.append((here, "a `require` rule must name its `backend`"))
        if kind in ("deny", "prefer") and not self._targets(r, kind):  # `deny: []` matched and said nothing
            problems.append(((*here, kind), f"`{kind}: []` names no backend: the rule would do nothing"))
        if r.backend is not None and kind != "require":
            problems.append(((*here, "backend"), "`backend` goes with `require` only"))
        if r.overrides and kind != "use":
            problems.append(((*here, "overrides"), "`overrides` goes with `use` only"))
        if kind in ("deny", "require") and r.severity is None:
            problems.append((here, f"a `{kind}` rule needs a `severity` (crash, accuracy, perf or support)"))
        for where, message in problems:
            self.add(f, where, message, rule=r.id)
        if kind == "deny" and not r.refs:
            self.add(
                f,
                (*here, "deny"),
                "a `deny` rule without `refs`",
                rule=r.id,
                level="warning",
                code="missing-refs",
                help="cite the upstream issue that establishes it, e.g. `vllm#50332`",
            )
        return not problems

    def _fact_values(self, f: _File, values: dict[str, Any] | None, where: Where, rid: str | None) -> dict[str, Any]:
        """*values* (fact key -> value) checked and normalised; the bad ones reported and left out."""
        out: dict[str, Any] = {}
        for k, v in (values or {}).items():
            try:
                out[k] = normalise_value(k, v)
            except FactError as exc:
                self.add(f, (*where, k), f"`{k}`: {exc.message}", help=exc.help, rule=rid)
        return out

    def implies_section(self, f: _File) -> None:
        """``implies``: facts that follow from facts."""
        for i, imp in f.entries("implies"):
            here: Where = ("implies", i)
            self.claim(f, imp.id, (*here, "id"))
            cond = self.cond(f, imp.when, (*here, "when"), imp.id) if imp.when is not None else None
            unless = self.cond(f, imp.unless, (*here, "unless"), imp.id) if imp.unless else None
            sets = self._fact_values(f, imp.set, (*here, "set"), imp.id)
            if cond is not None and imp.set is not None and len(sets) == len(imp.set) and not f.partial(here):
                self.implications.append(
                    Implication(imp.id, cond, sets, imp.because, tuple(imp.refs), self._origin(f, here), unless)
                )

    def unsupported_section(self, f: _File) -> None:
        """``unsupported``: deployments where a path knowingly has no backend."""
        for i, u in f.entries("unsupported"):
            here: Where = ("unsupported", i)
            self.claim(f, u.id, (*here, "id"))
            cond = self.cond(f, u.when, (*here, "when"), u.id) if u.when is not None else None
            if cond is not None and not f.partial(here):
                self.unsupported.append(
                    Unsupported(
                        u.id, cond, tuple(u.paths), u.because, self._origin(f, here), u.help, tuple(u.refs), u.refuse
                    )
                )

    def _first(self, table: dict[str, str], names: Iterable[str], f: _File) -> tuple[str, str] | None:
        """The first of *names* an earlier entry defined (and where), else record them all."""
        folded = [(n, " ".join(n.casefold().split())) for n in names]
        for n, key in folded:
            if key in table:
                return n, table[key]
        for _, key in folded:
            table[key] = f.src.display
        return None

    def model_section(self, f: _File) -> None:
        """``models``: the shipped model catalog; an id defined twice is an error (an operator
        file cannot silently redefine a catalog model, as it cannot reuse a rule id)."""
        kept = []
        for i, m in enumerate(f.spec.models):
            clash = self._first(self.model_ids, [m.id], f)
            if clash is not None:
                self.add(
                    f,
                    ("models", i, "id"),
                    f"duplicate model id `{clash[0]}` (first in {clash[1]})",
                    rule=m.id,
                    code="duplicate",
                    help="a catalog model cannot be redefined; give its facts with --fact, or another id",
                )
                continue
            self._fact_values(f, m.facts, ("models", i, "facts"), m.id)
            kept.append(m)
        self.models += parse_catalog([m.model_dump() for m in kept])

    def gpu_section(self, f: _File) -> None:
        """``gpus``: the shipped GPU catalog; a name or alias defined twice (ignoring case and
        blanks) is an error: an operator file cannot make `GB10` mean another GPU."""
        for i, g in enumerate(f.spec.gpus):
            clash = self._first(self.gpu_names, [g.name, *g.aliases], f)
            if clash is not None:
                self.add(
                    f,
                    ("gpus", i, "name"),
                    f"duplicate GPU name `{clash[0]}` (first in {clash[1]})",
                    rule=g.name,
                    code="duplicate",
                    help="a catalog GPU cannot be redefined; name a new product with names of its own",
                )
                continue
            if g.sm not in GPU_SMS:
                self.add(
                    f,
                    ("gpus", i, "sm"),
                    f"`{g.sm}` is not a known compute capability",
                    help="one of: " + ", ".join(GPU_SMS),
                    rule=g.name,
                )
                continue
            self.gpus.append(GpuProduct(g.name, tuple(g.aliases), g.sm, g.host_machine, g.unified_memory, g.source))

    def engine_section(self, f: _File) -> None:
        """``engine``: an engine's names, flags and environment variables."""
        e = f.spec.engine
        if e is None:
            return
        clash = self._first(self.engine_names, [e.name], f)
        if clash is not None:  # a second table would replace the first one's names and flags
            self.add(
                f,
                ("engine", "name"),
                f"duplicate engine `{clash[0]}` (first in {clash[1]})",
                rule=e.name,
                code="duplicate",
                help="an engine's names and flags are defined once; an operator file cannot remap them",
            )
            return
        for j, env in enumerate(e.env):
            rule = self._env_rule(f, e.name, env, ("engine", "env", j))
            if rule is not None:
                self.rules.append(rule)
        self.engines[e.name] = EngineMap(
            e.name,
            e.plugin,
            {k: dict(v) for k, v in e.aliases.items()},
            dict(e.moe_flag),
            {k: tuple(v) for k, v in e.dense_kernels.items()},
            self._origin(f, ("engine",)),
            {k: dict(v) for k, v in e.moe_flag_by_scheme.items()},
            {k: dict(v) for k, v in e.dense_env.items()},
        )

    def _env_rule(self, f: _File, engine: str, env: Any, here: Where) -> Rule | None:
        target = env.deny or env.use
        rid = f"{engine}.env.{env.name}={env.value}"
        if (env.deny is None) == (env.use is None) or target is None:
            self.add(f, here, "an env entry needs exactly one of `deny` or `use`", rule=rid)
            return None
        if not self.check_backends(f, [target], env.paths, here, rid):
            return None
        try:
            test = parse_test(f"{ENV_PREFIX}{env.name}", env.value)
        except ConditionError as exc:
            self.add(f, (*here, "name"), f"`{env.name}` is not an environment variable name: {exc.message}", rule=rid)
            return None
        return Rule(
            id=rid,
            kind="deny" if env.deny else "use",
            when=test,
            backends=(target,),
            paths=tuple(env.paths) if env.paths else None,
            severity="user",
            because=env.because,
            origin=self._origin(f, here, "user"),
        )

    def check_overrides(self) -> None:
        """Every id an ``overrides`` list names is a rule (or a catalog requirement)."""
        known = {r.id for r in self.rules} | self.partial_ids
        for f in self.files:
            for i, r in enumerate(f.spec.rules):
                for j, oid in enumerate(r.overrides or ()):
                    if oid not in known and not oid.startswith("catalog."):
                        hint = did_you_mean(oid, known)
                        self.add(
                            f,
                            ("rules", i, "overrides", j),
                            f"`overrides` names no rule `{oid}`",
                            help=f"did you mean `{hint[0]}`?" if hint else None,
                            rule=r.id,
                        )


#: Files parsed in this process, by name and text (the language server compiles the same shipped
#: files again on every edit of an operator file): the newest, up to :data:`_PARSED_MOST` characters
#: (five times the shipped tables; parsed, a character takes about 30 bytes: 60 MB at most).
_PARSED: dict[tuple[str, str], Located] = {}
_PARSED_MOST: Final = 2_000_000


def _parsed(text: str, display: str) -> Located:
    """*text* parsed (:func:`load_located`), once per process while it is among the newest."""
    key = (display, text)
    hit = _PARSED.pop(key, None)
    if hit is None:
        hit = load_located(text, display)
        held = sum(len(t) for _, t in _PARSED) + len(text)
        while _PARSED and held > _PARSED_MOST:
            held -= len(next(iter(_PARSED))[1])
            _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = hit
    return hit


def compile_files(files: Iterable[SourceFile]) -> Policy:
    """Read (bounded), check and compile *files* into one policy, or raise one :class:`PolicyError`."""
    from .loader import read_sources

    return compile_sources(read_sources(files))


def compile_sources(sources: Iterable[tuple[SourceFile, bytes | Diagnostic]]) -> Policy:
    """Check and compile files already read (their bytes, or why they could not be read)."""
    return Compiler().compile(sources)


def _tests_engine(cond: Condition) -> bool:
    """Whether *cond* holds only for deployments of engines it names (it tests ``deploy.engine``
    in every way it can hold)."""
    if isinstance(cond, Test):
        return cond.key == "deploy.engine" and cond.op in ("eq", "in")
    if isinstance(cond, All):
        return any(_tests_engine(c) for c in cond.children)
    if isinstance(cond, Any_):
        return bool(cond.children) and all(_tests_engine(c) for c in cond.children)
    return False
