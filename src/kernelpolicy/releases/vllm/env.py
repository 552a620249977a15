"""vLLM's environment variables read as the release reads them (``vllm/envs.py``).

A rule tests ``deploy.env.VLLM_USE_DEEP_GEMM_E8M0: "0"``; vLLM reads that variable as
``bool(int(text))``, so ``00``, `` 0``, ``+0`` and ``0_0`` mean the same to it, and ``false``
stops it. :func:`engine_env_value` turns the text a deployment sets into the one spelling the
rules use, with the parser each scanned release records in ``releases.json``
(``env_parsers``, written by :mod:`._scan` from the release's own ``envs.py``); a value the
release refuses is refused here too. Nothing here imports vLLM.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final

from packaging.version import Version

__all__ = ["EnvValueError", "engine_env_value", "env_parser"]

#: the longest value read (``int()`` of a longer digit string is refused by Python too)
_MAX_TEXT: Final = 4_000


class EnvValueError(ValueError):
    """A value the vLLM release refuses for a variable (the message says why, lowercase)."""


@functools.lru_cache(maxsize=1)
def _parsers() -> tuple[tuple[str, Mapping[str, Mapping[str, Any]]], ...]:
    """(release, its variable -> parser table), oldest release first."""
    from .versions import release_records

    return tuple((v, rec.get("env_parsers") or {}) for v, rec in release_records().items())


def env_parser(name: str, version: str | None = None) -> tuple[str, Mapping[str, Any]] | None:
    """The scanned release whose parser applies to *name*, and that parser.

    *version* picks the scanned release of the same ``major.minor`` (its newest patch scan);
    without one, or for a release not scanned, the newest scanned release that reads *name*.
    ``None`` when no scanned release records a parser for *name*.
    """
    table = _parsers()
    if version is not None:
        try:
            want = Version(version)
        except ValueError:  # InvalidVersion, or more digits than int() converts
            want = None
        if want is not None:
            same = [(v, p) for v, p in table if Version(v).release[:2] == want.release[:2]]
            if same:
                v, p = same[-1]
                return (v, p[name]) if name in p else None
    for v, p in reversed(table):
        if name in p:
            return v, p[name]
    return None


def _methods(text: str, methods: Any) -> str:
    steps: dict[str, Callable[[str], str]] = {"strip": str.strip, "lower": str.lower, "upper": str.upper}
    for m in methods or ():
        text = steps.get(str(m), str)(text)
    return text


def engine_env_value(name: str, text: str, version: str | None = None) -> str:
    """*text* of the variable *name* in the spelling the rules use, as vLLM *version* reads it.

    ``bool(int(...))`` flags become ``"0"``/``"1"``, ``int(...)`` values their decimal form,
    ``text.lower() in ("1", "true")`` flags ``"0"``/``"1"``, case-insensitive choices the
    choice's own spelling; a variable no scanned release parses is returned as written.

    :raises EnvValueError: the release refuses *text* (not an integer, not one of its choices).
    """
    found = env_parser(name, version)
    if found is None:
        return text
    release, parser = found
    kind = parser.get("kind")
    if kind in ("int_flag", "int"):
        if len(text) > _MAX_TEXT:
            raise EnvValueError(f"vLLM {release} reads it as an integer; a value of {len(text)} characters is not one")
        try:
            number = int(text)
        except ValueError:
            how = "`bool(int(...))`" if kind == "int_flag" else "`int(...)`"
            raise EnvValueError(f"vLLM {release} reads it as {how} and refuses `{text}`: use an integer") from None
        if kind == "int_flag":
            return "1" if number else "0"
        return str(number)
    if kind == "choices":
        choices = [str(c) for c in parser.get("choices") or ()]
        if parser.get("case_sensitive", True):
            if text in choices:
                return text
        else:
            match = next((c for c in choices if c.lower() == text.lower()), None)
            if match is not None:
                return match
        raise EnvValueError(f"vLLM {release} accepts only {', '.join(f'`{c}`' for c in choices)}; got `{text}`")
    if kind == "truthy":
        return "1" if _methods(text, parser.get("methods")) in set(parser.get("true") or ()) else "0"
    if kind == "text":
        return _methods(text, parser.get("methods"))
    return text
