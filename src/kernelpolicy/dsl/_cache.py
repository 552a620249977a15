"""The compiled-policy cache: plain JSON data, validated on read, bounded in size.

A compiled :class:`~kernelpolicy.policy.Policy` is stored as JSON under
``<cache root>/policies/policy-<key>.json``, where the key hashes every rule file's content and
the compiler's own source. Nothing in it is code: conditions are stored as the YAML values they
were written as and parsed again on read by the compiler's own parser
(:func:`~kernelpolicy.dsl.conditions.parse_test`), so a cached table passes the same checks as
a compiled one; every other field is checked for its type. An entry that fails any check, is
not a regular file, or is larger than :data:`MAX_ENTRY_BYTES` is ignored (the caller compiles
and rewrites it); the folder keeps at most :data:`MAX_ENTRIES` entries, the newest.

A shared machine is the threat this guards against (decision poisoning): the folder is used only
when it is a real folder (not a link) owned by this user and writable by no one else, and an
entry only when it is a regular file with the same owner and mode (a ``0777`` folder, or one
another user owns, is neither read nor written: each run compiles). Each entry carries the
SHA-256 of the compiled table it holds, bound to its key, so an entry edited in place (rules
deleted, the file name kept) no longer matches and is compiled again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from .._files import ReadError, read_owned, write_private
from ..errors import Diagnostic
from ..facts.gpu import GpuProduct
from ..facts.keys import PATHS, Kind
from ..facts.model import CatalogModel
from ..facts.record import normalise_value
from ..policy import LAYERS, Backend, EngineMap, FixEvidence, Implication, Order, Origin, Policy, Rule, Unsupported
from .conditions import TRUE, All, Any_, Condition, Not, Test, parse_test

__all__ = [
    "FORMAT",
    "MAX_ENTRIES",
    "MAX_ENTRY_BYTES",
    "CacheEntryError",
    "decode_policy",
    "encode_policy",
    "prune",
    "read_entry",
    "write_entry",
]

FORMAT: Final = "kernelpolicy.policy-cache/4"
#: The largest cache entry read (the shipped tables take about a tenth of this).
MAX_ENTRY_BYTES: Final = 4_000_000
#: The most compiled policies kept (each edit of a rule file makes a new one).
MAX_ENTRIES: Final = 16

_T = TypeVar("_T")
_KINDS: Final = ("deny", "prefer", "require", "use")


class CacheEntryError(ValueError):
    """A cache entry that is not a valid compiled policy."""


def _bad(what: str) -> CacheEntryError:
    return CacheEntryError(what)


# --------------------------------------------------------------------------- encoding


def _raw_operand(t: Test) -> Any:
    """The YAML value that :func:`parse_test` reads back as *t* (its text aside)."""
    op, operand = t.op, t.operand
    if op == "eq":
        if t.kind is Kind.INT_LIST:
            return list(operand)
        if t.kind is Kind.VERSION:
            return str(operand)
        return operand
    if op == "spec":
        return str(operand)
    if op == "cmp":
        return f"{operand[0]} {operand[1]}"
    if op == "has":
        return sorted(operand)
    # "in"
    if t.kind is Kind.VERSION:
        return [str(o) for o in operand]
    if t.kind is Kind.INT_LIST:
        return sorted(list(o) for o in operand)
    return sorted(operand, key=repr)


def _enc_cond(c: Condition) -> Any:
    if isinstance(c, Test):
        return {"k": c.key, "r": _raw_operand(c), "x": c.text}
    if isinstance(c, Not):
        return {"not": _enc_cond(c.child)}
    return {"all" if isinstance(c, All) else "any": [_enc_cond(k) for k in c.children]}


def _enc_origin(o: Origin) -> list[Any]:
    return [o.file, o.line, o.layer]


def _enc_diag(d: Diagnostic) -> dict[str, Any]:
    return {
        "message": d.message,
        "file": d.file,
        "line": d.line,
        "column": d.column,
        "level": d.level,
        "rule": d.rule,
        "help": d.help,
        "code": d.code,
        "source_line": d.source_line,
        "span": d.span,
    }


def _json_value(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def encode_policy(policy: Policy) -> dict[str, Any]:
    """Pure: *policy* as JSON-ready data (see :func:`decode_policy`)."""
    return {
        "backends": [
            {
                "id": b.id,
                "path": b.path,
                "requires": _enc_cond(b.requires),
                "warmup": b.warmup,
                "because": b.because,
                "refs": list(b.refs),
                "origin": _enc_origin(b.origin),
                "auto": b.auto,
            }
            for entries in policy.backends.values()
            for b in entries.values()
        ],
        "orders": [
            {
                "id": o.id,
                "path": o.path,
                "when": _enc_cond(o.when),
                "backends": list(o.backends),
                "origin": _enc_origin(o.origin),
            }
            for orders in policy.orders.values()
            for o in orders
        ],
        "rules": [
            {
                "id": r.id,
                "kind": r.kind,
                "when": _enc_cond(r.when),
                "backends": list(r.backends),
                "paths": None if r.paths is None else list(r.paths),
                "severity": r.severity,
                "because": r.because,
                "origin": _enc_origin(r.origin),
                "require": _enc_cond(r.require),
                "help": r.help,
                "refs": list(r.refs),
                "until": None if r.until is None else _enc_cond(r.until),
                "overrides": list(r.overrides),
                "fix": None if r.fix is None else [[f.package, f.file, f.kind, f.pattern] for f in r.fix],
            }
            for r in policy.rules
        ],
        "implications": [
            {
                "id": i.id,
                "when": _enc_cond(i.when),
                "sets": {k: _json_value(v) for k, v in i.sets.items()},
                "because": i.because,
                "refs": list(i.refs),
                "origin": _enc_origin(i.origin),
                "unless": None if i.unless is None else _enc_cond(i.unless),
            }
            for i in policy.implications
        ],
        "unsupported": [
            {
                "id": u.id,
                "when": _enc_cond(u.when),
                "paths": list(u.paths),
                "because": u.because,
                "origin": _enc_origin(u.origin),
                "help": u.help,
                "refs": list(u.refs),
                "refuse": u.refuse,
            }
            for u in policy.unsupported
        ],
        "models": [
            {"id": m.id, "source": m.source, "config": m.config, "facts": m.facts, "refs": list(m.refs)}
            for m in policy.models
        ],
        "gpus": [
            {
                "name": g.name,
                "aliases": list(g.aliases),
                "sm": g.sm,
                "host_machine": g.host_machine,
                "unified_memory": g.unified_memory,
                "source": g.source,
            }
            for g in policy.gpus
        ],
        "engines": [
            {
                "name": e.name,
                "plugin": e.plugin,
                "aliases": e.aliases,
                "moe_flag": e.moe_flag,
                "moe_flag_by_scheme": e.moe_flag_by_scheme,
                "dense_env": e.dense_env,
                "dense_kernels": {k: list(v) for k, v in e.dense_kernels.items()},
                "origin": _enc_origin(e.origin),
            }
            for e in policy.engines.values()
        ],
        "files": list(policy.files),
        "digest": policy.digest,
        "warnings": [_enc_diag(d) for d in policy.warnings],
    }


# --------------------------------------------------------------------------- decoding (checked)


def _typed(value: Any, typ: type[_T] | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise _bad(f"{what}: wrong type")
    return value


def _s(d: Mapping[str, Any], k: str) -> str:
    return str(_typed(d.get(k), str, k))


def _opt_s(d: Mapping[str, Any], k: str) -> str | None:
    v = d.get(k)
    return None if v is None else str(_typed(v, str, k))


def _strs(d: Mapping[str, Any], k: str) -> tuple[str, ...]:
    v = _typed(d.get(k), list, k)
    return tuple(_typed(x, str, k) for x in v)


def _obj(v: Any, what: str) -> dict[str, Any]:
    out: dict[str, Any] = _typed(v, dict, what)
    return out


def _items(data: Mapping[str, Any], k: str, fn: Callable[[dict[str, Any]], _T]) -> list[_T]:
    return [fn(_obj(x, k)) for x in _typed(data.get(k), list, k)]


def _str_map(v: Any, what: str) -> dict[str, str]:
    return {str(k): _typed(x, str, what) for k, x in _obj(v, what).items()}


def _dec_cond(v: Any) -> Condition:
    d = _obj(v, "condition")
    if "k" in d:
        t = parse_test(_s(d, "k"), d.get("r"))  # the compiler's own checks
        return Test(t.key, t.kind, t.op, t.operand, _s(d, "x"))
    if "not" in d:
        return Not(_dec_cond(d["not"]))
    key = "all" if "all" in d else "any"
    kids = tuple(_dec_cond(c) for c in _typed(d.get(key), list, key))
    if key == "all":
        return All(kids) if kids else TRUE
    return Any_(kids)


def _opt_cond(d: Mapping[str, Any], k: str) -> Condition | None:
    return None if d.get(k) is None else _dec_cond(d[k])


def _dec_origin(v: Any) -> Origin:
    o = _typed(v, list, "origin")
    if len(o) != 3 or o[2] not in LAYERS:
        raise _bad("origin")
    return Origin(_typed(o[0], str, "origin"), _typed(o[1], int, "origin"), o[2])


def _dec_diag(d: dict[str, Any]) -> Diagnostic:
    if d.get("level") not in ("error", "warning"):
        raise _bad("warning level")
    return Diagnostic(
        _s(d, "message"),
        file=_s(d, "file"),
        line=_typed(d.get("line"), int, "line"),
        column=_typed(d.get("column"), int, "column"),
        level=d["level"],
        rule=_opt_s(d, "rule"),
        help=_opt_s(d, "help"),
        code=_s(d, "code"),
        source_line=_opt_s(d, "source_line"),
        span=_typed(d.get("span"), int, "span"),
    )


def _dec_backend(d: dict[str, Any]) -> Backend:
    if d.get("path") not in PATHS:
        raise _bad("backend path")
    return Backend(
        _s(d, "id"),
        _s(d, "path"),
        _dec_cond(d.get("requires")),
        _typed(d.get("warmup"), bool, "warmup"),
        _opt_s(d, "because"),
        _strs(d, "refs"),
        _dec_origin(d.get("origin")),
        _typed(d.get("auto"), bool, "auto"),
    )


def _dec_rule(d: dict[str, Any]) -> Rule:
    if d.get("kind") not in _KINDS:
        raise _bad("rule kind")
    paths = None if d.get("paths") is None else _strs(d, "paths")
    return Rule(
        id=_s(d, "id"),
        kind=d["kind"],
        when=_dec_cond(d.get("when")),
        backends=_strs(d, "backends"),
        paths=paths,
        severity=_s(d, "severity"),
        because=_s(d, "because"),
        origin=_dec_origin(d.get("origin")),
        require=_dec_cond(d.get("require")),
        help=_opt_s(d, "help"),
        refs=_strs(d, "refs"),
        until=_opt_cond(d, "until"),
        overrides=_strs(d, "overrides"),
        fix=_dec_fix(d.get("fix")),
    )


def _dec_fix(d: Any) -> tuple[FixEvidence, ...] | None:
    if d is None:
        return None
    if not isinstance(d, list) or not d:
        raise _bad("rule fix")
    out = []
    for one in d:
        if not isinstance(one, list) or len(one) != 4 or not all(isinstance(x, str) for x in one):
            raise _bad("rule fix")
        if one[2] not in ("contains", "matches", "symbol"):
            raise _bad("rule fix kind")
        out.append(FixEvidence(one[0], one[1], one[2], one[3]))
    return tuple(out)


def _dec_implication(d: dict[str, Any]) -> Implication:
    sets = {str(k): normalise_value(str(k), v) for k, v in _obj(d.get("sets"), "sets").items()}
    return Implication(
        _s(d, "id"),
        _dec_cond(d.get("when")),
        sets,
        _opt_s(d, "because"),
        _strs(d, "refs"),
        _dec_origin(d.get("origin")),
        _opt_cond(d, "unless"),
    )


def _dec_unsupported(d: dict[str, Any]) -> Unsupported:
    return Unsupported(
        _s(d, "id"),
        _dec_cond(d.get("when")),
        _strs(d, "paths"),
        _s(d, "because"),
        _dec_origin(d.get("origin")),
        _opt_s(d, "help"),
        _strs(d, "refs"),
        _typed(d.get("refuse"), bool, "refuse"),
    )


def _dec_engine(d: dict[str, Any]) -> EngineMap:
    aliases = {str(p): _str_map(m, "aliases") for p, m in _obj(d.get("aliases"), "aliases").items()}
    dense = {
        str(k): tuple(_typed(x, str, "dense_kernels") for x in _typed(v, list, "dense_kernels"))
        for k, v in _obj(d.get("dense_kernels"), "dense_kernels").items()
    }
    return EngineMap(
        _s(d, "name"),
        _opt_s(d, "plugin"),
        aliases,
        _str_map(d.get("moe_flag"), "moe_flag"),
        dense,
        _dec_origin(d.get("origin")),
        {
            str(k): _str_map(v, "moe_flag_by_scheme")
            for k, v in _obj(d.get("moe_flag_by_scheme"), "moe_flag_by_scheme").items()
        },
        {str(k): _str_map(v, "dense_env") for k, v in _obj(d.get("dense_env"), "dense_env").items()},
    )


def _dec_gpu(d: dict[str, Any]) -> GpuProduct:
    um = d.get("unified_memory")
    if um is not None:
        _typed(um, bool, "unified_memory")
    return GpuProduct(_s(d, "name"), _strs(d, "aliases"), _s(d, "sm"), _opt_s(d, "host_machine"), um, _s(d, "source"))


def _dec_model(d: dict[str, Any]) -> CatalogModel:
    return CatalogModel(
        _s(d, "id"), _s(d, "source"), _obj(d.get("config"), "config"), _obj(d.get("facts"), "facts"), _strs(d, "refs")
    )


def decode_policy(data: Any) -> Policy:
    """The policy *data* (from :func:`encode_policy`) describes, every field checked.

    :raises CacheEntryError: (or the parser's ``ConditionError``/``FactError``, both
        ``ValueError``) when anything is missing, of the wrong type, or not a valid condition.
    """
    d = _obj(data, "policy")
    backends: dict[str, dict[str, Backend]] = {p: {} for p in PATHS if p != "warmup"}
    for b in _items(d, "backends", _dec_backend):
        if b.path not in backends or b.id in backends[b.path]:
            raise _bad("backend")
        backends[b.path][b.id] = b
    orders: dict[str, list[Order]] = {p: [] for p in backends}
    for od in _typed(d.get("orders"), list, "orders"):
        o = _obj(od, "order")
        if o.get("path") not in orders:
            raise _bad("order path")
        orders[o["path"]].append(
            Order(_s(o, "id"), o["path"], _dec_cond(o.get("when")), _strs(o, "backends"), _dec_origin(o.get("origin")))
        )
    rules = tuple(_items(d, "rules", _dec_rule))
    for r in rules:  # every backend a rule names is in the catalog
        if not all(any(b in entries for entries in backends.values()) for b in r.backends):
            raise _bad("rule names a backend the catalog lacks")
    engines = {e.name: e for e in _items(d, "engines", _dec_engine)}
    return Policy(
        backends=backends,
        orders={p: tuple(v) for p, v in orders.items()},
        rules=rules,
        implications=tuple(_items(d, "implications", _dec_implication)),
        models=tuple(_items(d, "models", _dec_model)),
        gpus=tuple(_items(d, "gpus", _dec_gpu)),
        engines=engines,
        files=_strs(d, "files"),
        digest=_s(d, "digest"),
        warnings=tuple(_items(d, "warnings", _dec_diag)),
        by_id={r.id: r for r in rules},
        unsupported=tuple(_items(d, "unsupported", _dec_unsupported)),
    )


# --------------------------------------------------------------------------- the folder


def _entry(folder: Path, key: str) -> Path:
    return folder / f"policy-{key}.json"


#: an entry's first bytes: its format, key and the digest of the policy that follows
_HEAD: Final = re.compile(rb'\{"format":"([^"\\]{1,64})","key":"([0-9a-f]{1,128})","sha256":"([0-9a-f]{64})","policy":')


def _digest(key: str, body: bytes) -> str:
    return hashlib.sha256(f"{FORMAT}\0{key}\0".encode() + body).hexdigest()


def read_entry(folder: Path, key: str) -> Policy | None:
    """The cached policy of *key*, or ``None`` when there is none, it is not valid, its digest
    does not match what it holds, or the folder or file is not this user's alone."""
    try:
        raw = read_owned(folder, _entry(folder, key).name, MAX_ENTRY_BYTES)
    except ReadError:
        return None
    head = _HEAD.match(raw)
    if head is None or not raw.endswith(b"}") or head.group(1).decode() != FORMAT or head.group(2).decode() != key:
        return None
    body = raw[head.end() : -1]
    if _digest(key, body) != head.group(3).decode():
        return None  # edited since it was written
    try:
        return decode_policy(json.loads(body))
    except (ValueError, TypeError, KeyError, RecursionError):  # not JSON, or not a valid policy
        return None


def write_entry(folder: Path, key: str, policy: Policy) -> None:
    """Store *policy* under *key* atomically, then :func:`prune`; a folder that cannot be
    written, or that is not this user's alone, is left alone (the next run compiles again)."""
    try:
        body = json.dumps(encode_policy(policy), separators=(",", ":")).encode()
    except (TypeError, ValueError):
        return  # a value JSON cannot hold: do not cache this policy
    head = f'{{"format":"{FORMAT}","key":"{key}","sha256":"{_digest(key, body)}","policy":'.encode()
    blob = head + body + b"}"
    if len(blob) > MAX_ENTRY_BYTES or _HEAD.match(head) is None:
        return
    if write_private(folder, _entry(folder, key).name, blob):
        prune(folder)


def prune(folder: Path, keep: int = MAX_ENTRIES) -> None:
    """Delete all but the newest *keep* entries, and what earlier releases left (pickles)."""
    try:
        with os.scandir(folder) as it:
            found = [
                (e.stat(follow_symlinks=False).st_mtime_ns, e.path, e.name) for e in it if e.name.startswith("policy-")
            ]
    except OSError:
        return
    found.sort(reverse=True)
    stale = [p for _, p, name in found if not name.endswith(".json")]
    stale += [p for _, p, name in found if name.endswith(".json")][keep:]
    for p in stale:
        with contextlib.suppress(OSError):
            os.unlink(p)
