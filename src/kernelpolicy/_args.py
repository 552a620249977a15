"""The public API's argument check: a wrong-typed argument is a ``TypeError`` naming the
function and the parameter (docs/design.md, "The API's argument types"), never an
``AttributeError`` from deep inside or a value read as something else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

__all__ = ["check_arg", "check_mapping", "check_strs"]

_WHAT: Final[dict[type, str]] = {
    str: "a string",
    bool: "True or False",
    Mapping: "a mapping",
    os.PathLike: "a path",
    type(None): "None",
}


def _names(types: tuple[type, ...]) -> str:
    return " or ".join(_WHAT.get(t, f"a `{t.__name__}`") for t in types)


def check_arg(func: str, param: str, value: object, *types: type) -> None:
    """:raises TypeError: ``kernelpolicy.<func>: `<param>` must be ..., not <type>`` when *value*
    is none of *types* (a ``bool`` is never taken for another type)."""
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        raise TypeError(f"kernelpolicy.{func}: `{param}` must be {_names(types)}, not {type(value).__name__}")


def check_mapping(func: str, param: str, value: object, *, values: tuple[type, ...] | None = None) -> None:
    """:raises TypeError: naming *param*, when *value* is not a mapping with string keys (and,
    with *values*, values of those types); ``None`` passes (the parameter's default)."""
    if value is None:
        return
    check_arg(func, param, value, Mapping, type(None))
    assert isinstance(value, Mapping)
    for k, v in value.items():
        if not isinstance(k, str):
            raise TypeError(f"kernelpolicy.{func}: `{param}` keys must be strings, not {type(k).__name__}")
        if values is not None and (isinstance(v, bool) or not isinstance(v, values)):
            raise TypeError(
                f"kernelpolicy.{func}: `{param}` values must be {_names(values)} (`{k}` is {type(v).__name__})"
            )


def check_strs(func: str, param: str, value: object) -> None:
    """:raises TypeError: naming *param*, when *value* is not a list, tuple or set of strings
    (a string is one item's characters, not a list of them: refused too)."""
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"kernelpolicy.{func}: `{param}` must be a list of strings, not {type(value).__name__}")
