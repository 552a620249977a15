"""Compile rule and policy files into a :class:`~kernelpolicy.policy.Policy` (no caching).

Every file is read, checked for structure and meaning, and compiled; every problem found in
any file is collected, and one :class:`~kernelpolicy.errors.PolicyError` reports them all,
each with its file, line and column.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..errors import Diagnostic, FactError, PolicyError, did_you_mean
from ..facts._keys import BACKENDS, GPU_SMS, PATHS
from ..facts._record import normalise_value
from ..facts.gpu import GpuProduct
from ..facts.model import CatalogModel, parse_catalog
from ..policy import Backend, EngineMap, Implication, Order, Origin, Policy, Rule, Unsupported
from ._source import SourceError, SourceFile, decode
from ._yaml import Located, YamlError, load_located
from .conditions import TRUE, Condition, ConditionError, parse_condition, parse_test
from .schema import (
    BackendSpec,
    EngineSpec,
    GpuSpec,
    ImplySpec,
    ModelSpec,
    OrderSpec,
    RuleFileSpec,
    RuleSpec,
)

__all__ = ["compile_files", "compile_sources"]


@dataclass
class _Ctx:
    diags: list[Diagnostic] = field(default_factory=list)

    def add(
        self,
        loc: Located | None,
        src: SourceFile,
        path: tuple[str | int, ...],
        message: str,
        *,
        help: str | None = None,
        rule: str | None = None,
        level: str = "error",
        code: str = "schema",
        key: bool = False,
    ) -> None:
        line = col = 0
        width = 1
        text = None
        if loc is not None:
            line, col, width = loc.where(path, key=key)
            text = loc.line_text(line)
        self.diags.append(
            Diagnostic(
                message,
                file=src.display,
                line=line,
                column=col,
                level=level,  # type: ignore[arg-type]
                rule=rule,
                help=help,
                code=code,
                source_line=text,
                span=width,
            )
        )


_FIELD_NAMES = {
    "backends": ("backend", "paths", "requires", "warmup", "because", "refs"),
    "rules": tuple(RuleSpec.model_fields),
}


def _pydantic_diags(
    exc: ValidationError,
    loc: Located,
    src: SourceFile,
    ctx: _Ctx,
    prefix: tuple[str | int, ...] = (),
) -> None:
    for err in exc.errors():
        path = prefix + tuple(err["loc"])
        # drop union-branch labels pydantic appends (e.g. `str`, `list[str]`)
        while path and isinstance(path[-1], str) and ("[" in path[-1] or path[-1] in ("str", "int", "bool")):
            path = path[:-1]
        field_name = path[-1] if path else ""
        rule_id = _rule_id_at(loc, path)
        typ = err["type"]
        if typ == "extra_forbidden":
            section = path[0] if path else ""
            known = _FIELD_NAMES.get(str(section), ())
            hint = did_you_mean(str(field_name), known) if known else []
            ctx.add(
                loc,
                src,
                path,
                f"unknown field `{field_name}`",
                help=f"did you mean `{hint[0]}`?" if hint else None,
                rule=rule_id,
                key=True,
            )
        elif typ == "missing":
            ctx.add(loc, src, path[:-1], f"missing field `{field_name}`", rule=rule_id)
        else:
            msg = err["msg"]
            msg = msg[:1].lower() + msg[1:]
            where = ".".join(str(p) for p in path[2:]) or str(field_name)
            ctx.add(loc, src, path, f"`{where}`: {msg}", rule=rule_id)


_SECTIONS: dict[str, Any] = {
    "backends": BackendSpec,
    "order": OrderSpec,
    "rules": RuleSpec,
    "implies": ImplySpec,
    "models": ModelSpec,
    "gpus": GpuSpec,
}


def _validate_file(loc: Located, src: SourceFile, ctx: _Ctx) -> tuple[RuleFileSpec, bool]:
    """Validate each entry on its own, so one bad entry hides no problem in the others."""
    ok = True
    sections: dict[str, Any] = {}
    for name, value in loc.data.items():
        if name == "engine":
            try:
                sections["engine"] = EngineSpec.model_validate(value)
            except ValidationError as exc:
                _pydantic_diags(exc, loc, src, ctx, prefix=("engine",))
                ok = False
            continue
        model = _SECTIONS.get(name)
        if model is None:
            hint = did_you_mean(str(name), [*_SECTIONS, "engine"])
            ctx.add(
                loc,
                src,
                (name,),
                f"unknown section `{name}`",
                key=True,
                help=f"did you mean `{hint[0]}`?" if hint else "sections: " + ", ".join([*_SECTIONS, "engine"]),
            )
            ok = False
            continue
        if not isinstance(value, list):
            ctx.add(loc, src, (name,), f"section `{name}` must be a list")
            ok = False
            continue
        items = []
        for i, item in enumerate(value):
            try:
                items.append(model.model_validate(item))
            except ValidationError as exc:
                _pydantic_diags(exc, loc, src, ctx, prefix=(name, i))
                ok = False
        sections[name] = items
    return RuleFileSpec.model_construct(**{**RuleFileSpec().model_dump(), **sections}), ok


def _rule_id_at(loc: Located, path: tuple[str | int, ...]) -> str | None:
    if len(path) >= 2 and isinstance(path[1], int):
        try:
            item = loc.data[path[0]][path[1]]
        except (KeyError, IndexError, TypeError):
            return None
        if isinstance(item, dict):
            rid = item.get("id") or item.get("backend") or item.get("name")
            return str(rid) if rid is not None else None
    return None


def _cond(
    data: Any,
    loc: Located,
    src: SourceFile,
    path: tuple[str | int, ...],
    ctx: _Ctx,
    rule: str | None,
) -> Condition | None:
    if data is None:
        return TRUE
    try:
        return parse_condition(data)
    except ConditionError as exc:
        ctx.add(
            loc,
            src,
            (*path, *exc.path),
            exc.message,
            help=exc.help,
            rule=rule,
            key=bool(exc.path) and "unknown fact key" in exc.message,
        )
        return None


def compile_files(files: Iterable[SourceFile]) -> Policy:
    """Read (bounded), check and compile *files* into one policy, or raise one :class:`PolicyError`."""
    from .loader import read_sources

    return compile_sources(read_sources(files))


def compile_sources(sources: Iterable[tuple[SourceFile, bytes | Diagnostic]]) -> Policy:
    """Check and compile files already read (their bytes, or why they could not be read)."""
    ctx = _Ctx()
    parsed: list[tuple[SourceFile, Located, RuleFileSpec]] = []
    broken = False  # a file failed to parse: do not cascade reference errors from it
    digest = hashlib.sha256()
    names: list[str] = []
    for src, data in sources:
        if isinstance(data, Diagnostic):
            ctx.diags.append(data)
            continue
        try:
            text = decode(data, src.display)
        except SourceError as exc:
            ctx.diags.append(exc.diagnostic)
            continue
        digest.update(f"{src.layer}\0{src.display}\0".encode() + text.encode("utf-8") + b"\0")
        names.append(src.display)
        try:
            loc = load_located(text, src.display)
        except YamlError as exc:
            ctx.diags.append(exc.diagnostic)
            broken = True
            continue
        if loc.data is None:
            continue
        if not isinstance(loc.data, dict):
            ctx.add(
                loc,
                src,
                (),
                "a rule file must be a mapping of sections",
                help="sections: backends, order, rules, implies, unsupported, models, gpus, engine",
            )
            continue
        spec, ok = _validate_file(loc, src, ctx)
        broken = broken or not ok
        parsed.append((src, loc, spec))

    # 1. the catalog: what exists on each path
    backends: dict[str, dict[str, Backend]] = {p: {} for p in PATHS if p != "warmup"}
    for src, loc, spec in parsed:
        for i, b in enumerate(spec.backends):
            here: tuple[str | int, ...] = ("backends", i)
            for path in b.paths:
                if path == "warmup":
                    ctx.add(
                        loc,
                        src,
                        (*here, "paths"),
                        "`warmup` is derived: mark a backend `warmup: true` instead",
                        rule=b.backend,
                    )
                    continue
                if b.backend not in BACKENDS[path]:
                    hint = did_you_mean(b.backend, BACKENDS[path])
                    ctx.add(
                        loc,
                        src,
                        (*here, "backend"),
                        f"`{b.backend}` is not a backend id of path `{path}`",
                        help=f"did you mean `{hint[0]}`?" if hint else "ids: " + ", ".join(BACKENDS[path]),
                        rule=b.backend,
                    )
                    continue
                if b.backend in backends[path]:
                    ctx.add(
                        loc,
                        src,
                        (*here, "backend"),
                        f"`{b.backend}` is declared twice on path `{path}`",
                        rule=b.backend,
                        code="duplicate",
                    )
                    continue
                cond = _cond(b.requires, loc, src, (*here, "requires"), ctx, b.backend)
                if cond is None:
                    continue
                line = loc.where(here)[0]
                backends[path][b.backend] = Backend(
                    b.backend,
                    path,
                    cond,
                    b.warmup,
                    b.because,
                    tuple(b.refs),
                    Origin(src.display, line, src.layer),
                    b.auto,
                )

    def exists(backend: str, path: str) -> bool:
        if path == "warmup":
            return any(e.warmup for p, entries in backends.items() for k, e in entries.items() if k == backend)
        return backend in backends.get(path, {})

    def check_backends(
        names_: Sequence[str],
        paths: Sequence[str] | None,
        loc: Located,
        src: SourceFile,
        where: tuple[str | int, ...],
        rid: str,
    ) -> bool:
        ok = True
        all_ids = sorted({b for bs in BACKENDS.values() for b in bs})
        for n in names_:
            if broken and n in all_ids:
                continue  # its catalog entry may be in the file that did not load
            scope = list(paths) if paths else [p for p in backends if n in backends[p]]
            if not scope:
                hint = [h for h in did_you_mean(n, all_ids) if h != n]
                ctx.add(
                    loc,
                    src,
                    where,
                    f"no path has a backend `{n}`" + (" in the catalog" if n in all_ids else ""),
                    help=f"did you mean `{hint[0]}`?" if hint else None,
                    rule=rid,
                )
                ok = False
            for p in scope:
                if not exists(n, p):
                    ctx.add(loc, src, where, f"backend `{n}` does not exist on path `{p}`", rule=rid)
                    ok = False
        return ok

    # 2. orders, rules, implications, catalogs, engines
    orders: dict[str, list[Order]] = {p: [] for p in backends}
    rules: list[Rule] = []
    implications: list[Implication] = []
    unsupported: list[Unsupported] = []
    models: list[CatalogModel] = []
    gpus: list[GpuProduct] = []
    engines: dict[str, EngineMap] = {}
    seen_ids: dict[str, str] = {}

    def claim(rid: str, loc: Located, src: SourceFile, where: tuple[str | int, ...]) -> None:
        if rid in seen_ids:
            ctx.add(
                loc,
                src,
                where,
                f"duplicate rule id `{rid}` (first in {seen_ids[rid]})",
                rule=rid,
                code="duplicate",
            )
        else:
            seen_ids[rid] = f"{src.display}:{loc.where(where)[0]}"

    for src, loc, spec in parsed:
        for i, o in enumerate(spec.order):
            here = ("order", i)
            claim(o.id, loc, src, (*here, "id"))
            cond = _cond(o.when, loc, src, (*here, "when"), ctx, o.id)
            if check_backends(o.backends, [o.path], loc, src, (*here, "backends"), o.id) and cond is not None:
                orders[o.path].append(
                    Order(
                        o.id,
                        o.path,
                        cond,
                        tuple(o.backends),
                        Origin(src.display, loc.where(here)[0], src.layer),
                    )
                )
        for i, r in enumerate(spec.rules):
            rule = _compile_rule(r, i, loc, src, ctx, check_backends)
            if rule is not None:
                claim(r.id, loc, src, ("rules", i, "id"))
                rules.append(rule)
        for i, imp in enumerate(spec.implies):
            here = ("implies", i)
            claim(imp.id, loc, src, (*here, "id"))
            cond = _cond(imp.when, loc, src, (*here, "when"), ctx, imp.id)
            unless = _cond(imp.unless, loc, src, (*here, "unless"), ctx, imp.id) if imp.unless else None
            sets: dict[str, Any] = {}
            for k, v in imp.set.items():
                try:
                    sets[k] = normalise_value(k, v)
                except FactError as exc:
                    ctx.add(
                        loc,
                        src,
                        (*here, "set", k),
                        f"`{k}`: {exc.message}",
                        help=exc.help,
                        rule=imp.id,
                    )
            if cond is not None and len(sets) == len(imp.set):
                implications.append(
                    Implication(
                        imp.id,
                        cond,
                        sets,
                        imp.because,
                        tuple(imp.refs),
                        Origin(src.display, loc.where(here)[0], src.layer),
                        unless,
                    )
                )
        for i, u in enumerate(spec.unsupported):
            here = ("unsupported", i)
            claim(u.id, loc, src, (*here, "id"))
            cond = _cond(u.when, loc, src, (*here, "when"), ctx, u.id)
            if cond is not None:
                unsupported.append(
                    Unsupported(
                        u.id,
                        cond,
                        tuple(u.paths),
                        u.because,
                        Origin(src.display, loc.where(here)[0], src.layer),
                        u.help,
                        tuple(u.refs),
                    )
                )
        for i, m in enumerate(spec.models):
            for k, v in (m.facts or {}).items():
                try:
                    normalise_value(k, v)
                except FactError as exc:
                    ctx.add(
                        loc,
                        src,
                        ("models", i, "facts", k),
                        f"`{k}`: {exc.message}",
                        help=exc.help,
                        rule=m.id,
                    )
        models += parse_catalog([m.model_dump() for m in spec.models])
        for i, g in enumerate(spec.gpus):
            if g.sm not in GPU_SMS:
                ctx.add(
                    loc,
                    src,
                    ("gpus", i, "sm"),
                    f"`{g.sm}` is not a known compute capability",
                    help="one of: " + ", ".join(GPU_SMS),
                    rule=g.name,
                )
                continue
            gpus.append(GpuProduct(g.name, tuple(g.aliases), g.sm, g.host_machine, g.unified_memory, g.source))
        if spec.engine is not None:
            e = spec.engine
            for j, env in enumerate(e.env):
                where_env: tuple[str | int, ...] = ("engine", "env", j)
                here = where_env
                target = env.deny or env.use
                rid = f"{e.name}.env.{env.name}={env.value}"
                if (env.deny is None) == (env.use is None) or target is None:
                    ctx.add(
                        loc,
                        src,
                        here,
                        "an env entry needs exactly one of `deny` or `use`",
                        rule=rid,
                    )
                    continue
                if not check_backends([target], env.paths, loc, src, here, rid):
                    continue
                try:
                    env_test = parse_test(f"deploy.env.{env.name}", env.value)
                except ConditionError as exc:
                    ctx.add(
                        loc,
                        src,
                        (*here, "name"),
                        f"`{env.name}` is not an environment variable name: {exc.message}",
                        rule=rid,
                    )
                    continue
                rules.append(
                    Rule(
                        id=rid,
                        kind="deny" if env.deny else "use",
                        when=env_test,
                        backends=(target,),
                        paths=tuple(env.paths) if env.paths else None,
                        severity="user",
                        because=env.because,
                        origin=Origin(src.display, loc.where(here)[0], "user"),
                    )
                )
            engines[e.name] = EngineMap(
                e.name,
                e.plugin,
                {k: dict(v) for k, v in e.aliases.items()},
                dict(e.moe_flag),
                {k: tuple(v) for k, v in e.dense_kernels.items()},
                Origin(src.display, loc.where(("engine",))[0], src.layer),
            )

    by_id = {r.id: r for r in rules}
    for src, loc, spec in parsed:
        for i, r in enumerate(spec.rules):
            for j, oid in enumerate(r.overrides):
                if oid not in by_id and not oid.startswith("catalog."):
                    hint = did_you_mean(oid, by_id)
                    ctx.add(
                        loc,
                        src,
                        ("rules", i, "overrides", j),
                        f"`overrides` names no rule `{oid}`",
                        help=f"did you mean `{hint[0]}`?" if hint else None,
                        rule=r.id,
                    )

    if any(d.level == "error" for d in ctx.diags):
        raise PolicyError(ctx.diags)
    return Policy(
        backends=backends,
        orders={p: tuple(v) for p, v in orders.items()},
        rules=tuple(rules),
        implications=tuple(implications),
        models=tuple(models),
        gpus=tuple(gpus),
        engines=engines,
        files=tuple(names),
        digest="sha256:" + digest.hexdigest(),
        warnings=tuple(ctx.diags),
        by_id=by_id,
        unsupported=tuple(unsupported),
    )


def _compile_rule(r: RuleSpec, i: int, loc: Located, src: SourceFile, ctx: _Ctx, check_backends: Any) -> Rule | None:
    here: tuple[str | int, ...] = ("rules", i)
    effects = [k for k in ("deny", "prefer", "require", "use") if getattr(r, k) is not None]
    if len(effects) != 1:
        ctx.add(
            loc,
            src,
            here,
            "a rule needs exactly one effect: `deny`, `prefer`, `require` or `use`"
            + (f" (it has {', '.join(effects)})" if effects else ""),
            rule=r.id,
        )
        return None
    kind = effects[0]
    ok = True
    paths = tuple(r.paths) if r.paths else None
    if kind == "deny":
        targets = (r.deny,) if isinstance(r.deny, str) else tuple(r.deny or ())
    elif kind == "prefer":
        targets = tuple(r.prefer or ())
        if not paths:
            ctx.add(loc, src, (*here, "prefer"), "a `prefer` rule must name its `paths`", rule=r.id)
            ok = False
    elif kind == "use":
        targets = (r.use,) if r.use else ()
        if src.layer == "shipped":
            ctx.add(
                loc,
                src,
                (*here, "use"),
                "`use` is an operator's choice: put it in a policy file, not in rules/",
                rule=r.id,
            )
            ok = False
    else:
        targets = (r.backend,) if isinstance(r.backend, str) else tuple(r.backend or ())
        if not targets:
            ctx.add(loc, src, here, "a `require` rule must name its `backend`", rule=r.id)
            ok = False
    if r.backend is not None and kind != "require":
        ctx.add(loc, src, (*here, "backend"), "`backend` goes with `require` only", rule=r.id)
        ok = False
    if r.overrides and kind != "use":
        ctx.add(loc, src, (*here, "overrides"), "`overrides` goes with `use` only", rule=r.id)
        ok = False
    if kind in ("deny", "require") and r.severity is None:
        ctx.add(
            loc,
            src,
            here,
            f"a `{kind}` rule needs a `severity` (crash, accuracy, perf or support)",
            rule=r.id,
        )
        ok = False
    if kind == "deny" and not r.refs:
        ctx.add(
            loc,
            src,
            (*here, "deny"),
            "a `deny` rule without `refs`",
            rule=r.id,
            level="warning",
            code="missing-refs",
            help="cite the upstream issue that establishes it, e.g. `vllm#50332`",
        )
    if targets and not check_backends(targets, paths, loc, src, (*here, kind), r.id):
        ok = False
    when = _cond(r.when, loc, src, (*here, "when"), ctx, r.id)
    until = _cond(r.until, loc, src, (*here, "until"), ctx, r.id) if r.until is not None else None
    require = _cond(r.require, loc, src, (*here, "require"), ctx, r.id) if r.require is not None else TRUE
    if not ok or when is None or require is None or (r.until is not None and until is None):
        return None
    return Rule(
        id=r.id,
        kind=kind,  # type: ignore[arg-type]
        when=when,
        backends=targets,
        paths=paths,
        severity=r.severity or ("user" if kind == "use" else "perf"),
        because=r.because,
        origin=Origin(src.display, loc.where(here)[0], src.layer),
        require=require,
        help=r.help,
        refs=tuple(r.refs),
        until=until,
        overrides=tuple(r.overrides),
    )
