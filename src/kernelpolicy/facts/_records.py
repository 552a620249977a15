"""Strict records read from JSON: a :func:`record` class's fields, each checked against its annotation.

Only the shapes model configs need: ``str``, ``int`` (never a ``bool`` or a float), ``bool``,
``Any``, ``list[T]``, ``dict[str, T]``, ``Literal[...]`` of strings, unions (``T | None``) and
nested records. A field declared with :func:`spec` may name an ``alias`` (the key read first, as
checkpoints write it) and a ``length`` (a list's exact length). Keys a record does not declare
are ignored.

:func:`read` builds the record or raises :class:`Invalid`, which says where (the keys and
indices from the record down), what was expected, and what was found; the first field in
declaration order that fails is the one reported. Each type's check is built once, on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

__all__ = ["MISSING", "Invalid", "read", "record", "spec"]

T = TypeVar("T")
_Check = Callable[[Any], Any]

#: :attr:`Invalid.got` of a required key that is absent.
MISSING: Final = object()


class Invalid(ValueError):
    """A value that does not fit its declared type."""

    def __init__(self, loc: tuple[str | int, ...], reason: str, got: object = MISSING) -> None:
        self.loc = loc  #: keys and list indices from the record down to the value
        self.reason = reason  #: what was expected (``expected an integer``), lowercase
        self.got = got  #: the value found, or :data:`MISSING`
        super().__init__(reason)

    def under(self, key: str | int) -> Invalid:
        """This error as seen from the container that holds its value at *key*."""
        return Invalid((key, *self.loc), self.reason, self.got)


# ----------------------------------------------------------------------------- declaring records


class _Spec:
    """A field's default and how it is read (:func:`spec`)."""

    __slots__ = ("alias", "default", "length")

    def __init__(self, default: Callable[[], Any] | None, alias: str | None, length: int | None) -> None:
        self.default = default
        self.alias = alias
        self.length = length


def spec(
    *,
    default: object = None,
    default_factory: Callable[[], Any] | None = None,
    alias: str | None = None,
    length: int | None = None,
) -> Any:
    """A field's default (*default*, or a fresh *default_factory()*), the *alias* read before
    its name, and a list's exact *length*."""
    return _Spec(default_factory or functools.partial(_same, default), alias, length)


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    keys: tuple[str, ...]  #: the alias first, then the name
    default: Callable[[], Any] | None  #: ``None``: the key is required
    length: int | None


def record(cls: type[T]) -> type[T]:
    """*cls* as an immutable record of its annotated fields: built by keyword, compared and
    shown field by field. (A dataclass would compile an ``__init__`` per class, which a cold
    ``explain`` pays for; this one is shared.)"""
    fields = []
    for name in inspect.get_annotations(cls):
        declared = cls.__dict__.get(name, _REQUIRED)
        if isinstance(declared, _Spec):
            keys = (declared.alias, name) if declared.alias else (name,)
            fields.append(_Field(name, keys, declared.default, declared.length))
            delattr(cls, name)
        else:
            default = None if declared is _REQUIRED else functools.partial(_same, declared)
            fields.append(_Field(name, (name,), default, None))
    cls.__record_fields__ = tuple(fields)  # type: ignore[attr-defined]
    for name, method in _METHODS.items():
        setattr(cls, name, method)
    return cls


_REQUIRED: Final = object()


def _same(value: object) -> object:
    return value


def _fields(obj: Any) -> tuple[_Field, ...]:
    fields: tuple[_Field, ...] = obj.__record_fields__
    return fields


def _init(self: Any, **values: Any) -> None:
    for f in _fields(self):
        if f.name in values:
            value = values.pop(f.name)
        elif f.default is not None:
            value = f.default()
        else:
            raise TypeError(f"{type(self).__name__}() needs `{f.name}`")
        object.__setattr__(self, f.name, value)
    if values:
        raise TypeError(f"{type(self).__name__}() has no field `{next(iter(values))}`")


def _setattr(self: Any, name: str, value: object) -> None:
    raise AttributeError(f"{type(self).__name__} is immutable (cannot set `{name}`)")


def _repr(self: Any) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in _fields(self))
    return f"{type(self).__name__}({shown})"


def _eq(self: Any, other: object) -> object:
    if type(other) is not type(self):
        return NotImplemented
    return all(getattr(self, f.name) == getattr(other, f.name) for f in _fields(self))


#: What :func:`record` gives every record class (``__hash__`` is ``None``: a record holds lists).
_METHODS: Final[dict[str, object]] = {
    "__init__": _init,
    "__setattr__": _setattr,
    "__repr__": _repr,
    "__eq__": _eq,
    "__hash__": None,
}


# ----------------------------------------------------------------------------- reading


def read(cls: type[T], data: object) -> T:
    """*data* as a *cls* record (a :func:`record` class), every declared field checked.

    :raises Invalid: the first field (in declaration order, depth first) that does not fit.
    """
    record: T = _check_of(cls)(data)
    return record


_CHECKS: dict[object, _Check] = {}


def _check_of(tp: object) -> _Check:
    hit = _CHECKS.get(tp)
    if hit is None:
        hit = _CHECKS[tp] = _build(tp)
    return hit


def _scalar(kind: type, reason: str) -> _Check:
    def check(value: Any) -> Any:
        if type(value) is not kind:  # strict: `True` is not an integer, `8.0` is not either
            raise Invalid((), reason, value)
        return value

    return check


_SCALARS: Final = {
    int: _scalar(int, "expected an integer"),
    str: _scalar(str, "expected a string"),
    bool: _scalar(bool, "expected true or false"),
}


def _either(options: tuple[str, ...]) -> str:
    shown = [f"`{o}`" for o in options]
    return "expected " + (", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else shown[0])


def _build(tp: Any) -> _Check:
    if tp is Any:
        return lambda value: value
    if tp in _SCALARS:
        return _SCALARS[tp]
    if isinstance(tp, type) and hasattr(tp, "__record_fields__"):
        return _reader(tp)
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        if not all(isinstance(a, str) for a in args):
            raise TypeError(f"only string literals are supported, not {tp}")
        return _literal(args)
    if origin in (Union, types.UnionType):
        return _union(args)
    if origin is list:
        return _list(_check_of(args[0]))
    if origin is dict and args[0] is str:
        return _dict(_check_of(args[1]))
    raise TypeError(f"no check for {tp!r}")


def _literal(options: tuple[str, ...]) -> _Check:
    reason = _either(options)

    def check(value: Any) -> Any:
        if isinstance(value, str) and value in options:
            return value
        raise Invalid((), reason, value)

    return check


def _union(members: tuple[Any, ...]) -> _Check:
    nullable = type(None) in members
    checks = [_check_of(m) for m in members if m is not type(None)]

    def check(value: Any) -> Any:
        if value is None and nullable:
            return None
        first: Invalid | None = None
        for one in checks:
            try:
                return one(value)
            except Invalid as exc:
                first = first or exc
        assert first is not None
        raise first

    return check


def _list(item: _Check) -> _Check:
    def check(value: Any) -> Any:
        if not isinstance(value, list):
            raise Invalid((), "expected a list", value)
        out = []
        for i, x in enumerate(value):
            try:
                out.append(item(x))
            except Invalid as exc:
                raise exc.under(i) from None
        return out

    return check


def _dict(item: _Check) -> _Check:
    def check(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise Invalid((), "expected a mapping", value)
        out = {}
        for k, x in value.items():
            if not isinstance(k, str):
                raise Invalid((), "expected string keys", k)
            try:
                out[k] = item(x)
            except Invalid as exc:
                raise exc.under(k) from None
        return out

    return check


def _reader(cls: type) -> _Check:
    fields: list[tuple[_Field, _Check]] | None = None

    def check(value: Any) -> Any:
        nonlocal fields
        if fields is None:  # late: a record may name records declared after it
            hints = get_type_hints(cls)
            fields = [(f, _check_of(hints[f.name])) for f in _fields(cls)]
        if not isinstance(value, Mapping):
            raise Invalid((), "expected a mapping", value)
        kwargs = {}
        for f, check_field in fields:
            key = next((k for k in f.keys if k in value), None)
            if key is None:
                if f.default is None:
                    raise Invalid((f.keys[-1],), "missing")
                kwargs[f.name] = f.default()
                continue
            raw = value[key]
            if f.length is not None and isinstance(raw, list) and len(raw) != f.length:
                raise Invalid((key,), f"expected {f.length} items", raw)
            try:
                kwargs[f.name] = check_field(raw)
            except Invalid as exc:
                raise exc.under(key) from None
        return cls(**kwargs)

    return check
