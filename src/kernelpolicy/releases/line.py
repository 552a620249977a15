"""Reading an engine's launch line, the parts every engine shares: the line split into tokens
and its leading ``VAR=VALUE`` assignments, an engine's flag table as an argparse parser that
reads a line of any length in linear time, a YAML ``--config`` file as flags, and the one-line
warnings for flags that decide no kernel or that the engine's parser does not have.

Each engine's own reading (its spellings, its config-file rules, its refusals) is in its spec
(:mod:`kernelpolicy.releases.vllm.spec`, :mod:`kernelpolicy.releases.sglang.spec`), on top of these.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from .._paths import expand_user
from ..errors import UsageError, did_you_mean
from .table import Flag

__all__ = [
    "LineValues",
    "check_config_value",
    "config_file",
    "flag_tokens",
    "ignored_note",
    "leading_env",
    "parse_known",
    "serve_parser",
    "split_line",
    "unknown_note",
]

_ENV_ASSIGN: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.S)
_MAX_CONFIG_BYTES: Final = 1024 * 1024
#: Flags per argparse call: argparse's parse is quadratic in the number of options on a line
#: (16,000 ignored `--foo 1` pairs took 21 s), so a line is parsed in runs of this many.
_FLAGS_PER_PARSE: Final = 64
#: The ignored flags one warning names (a line of 16,000 of them gave one 100 KB line).
_IGNORED_SHOWN: Final = 8
_FLAG_SHOWN: Final = 40


@dataclass(frozen=True)
class LineValues:
    """A launch line as its engine's flag table reads it."""

    values: dict[str, Any]  #: flag values by ``dest`` (the model as ``model``)
    env: dict[str, str]  #: the line's leading assignments
    ignored: tuple[str, ...]  #: the engine's flags that decide no kernel, as the line wrote them
    engine: str  #: whose launch line it is (a spec's ``name``)
    notes: tuple[str, ...] = ()  #: warnings of the engine's reading, one line each


class _ServeParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"serve line: {message}")


def serve_parser(flags: Sequence[Flag], prog: str) -> argparse.ArgumentParser:
    """An argparse parser of *flags* (an engine's table) that refuses with a ``UsageError``."""
    p = _ServeParser(prog=prog, add_help=False, allow_abbrev=False)
    for flag in flags:
        if flag.store_true:
            p.add_argument(*flag.names, dest=flag.dest, action="store_true", default=None)
        else:
            p.add_argument(*flag.names, dest=flag.dest, type=flag.type)
    return p


def parse_known(parser: argparse.ArgumentParser, tokens: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """``parser.parse_known_args(tokens)`` in linear time: the set values (a later flag wins) and
    the unread tokens in order, as one call would give them.

    The line is cut before a flag (as argparse tells a flag from a value, ``-5`` being a value)
    into runs of :data:`_FLAGS_PER_PARSE` flags; a flag's value never crosses a flag, so each run
    reads as it reads within the whole line. ``--`` ends the flags: it and the rest are one run.
    """
    runs: list[list[str]] = [[]]
    flags = 0
    for i, token in enumerate(tokens):
        if token == "--":
            runs.append(list(tokens[i:]))
            break
        if parser._parse_optional(token) is not None:  # argparse's own test of a flag
            flags += 1
            if flags > _FLAGS_PER_PARSE:
                runs.append([])
                flags = 1
        runs[-1].append(token)
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for run in runs:
        if not run:
            continue
        ns, extra = parser.parse_known_args(run)
        values.update({k: v for k, v in vars(ns).items() if v is not None})
        unknown += extra
    return values, unknown


def split_line(tokens: Sequence[str]) -> list[str]:
    """The tokens of a launch line (a whole line quoted as one argument is split as a shell would)."""
    rest = list(tokens)
    if len(rest) == 1 and " " in rest[0]:
        try:
            rest = shlex.split(rest[0])
        except ValueError as exc:  # an unclosed quote
            raise UsageError(f"serve line: {str(exc).lower()}", help="the command after `--`") from None
    return rest


def leading_env(rest: list[str]) -> dict[str, str]:
    """The line's leading ``VAR=VALUE`` assignments, taken off the front of *rest*."""
    env: dict[str, str] = {}
    while rest and (m := _ENV_ASSIGN.match(rest[0])):
        env[m.group(1)] = m.group(2)
        rest.pop(0)
    return env


def check_config_value(path: str, key: str, value: object, flags: Sequence[Flag]) -> None:
    """A ``--config`` value of the kind its flag takes: an engine would read ``"false"`` for a
    switch as the switch turned on, and keep one of two sizes; refused instead of mis-read."""
    flag = next(
        (f for f in flags if f.dest == key.replace("-", "_") or ("--" + key.replace("_", "-")) in f.names), None
    )
    if flag is None or value is None:
        return
    if flag.store_true and not isinstance(value, bool):
        raise UsageError(f"--config `{path}`: `{key}` takes true or false, got `{value!r}`")
    if not flag.store_true and isinstance(value, list | tuple | Mapping | bool):
        raise UsageError(f"--config `{path}`: `{key}` takes one value, got `{value!r}`")


def flag_tokens(flag: str, value: object, kept: Collection[str] = ()) -> list[str]:
    """One ``key: value`` of a YAML config as command-line tokens; a mapping value bears on no
    kernel choice and is dropped, unless *flag* is in *kept* (then it is passed as JSON)."""
    if isinstance(value, bool):
        return [flag] if value else []
    if isinstance(value, list | tuple):
        return [flag, *map(str, value)]
    if isinstance(value, Mapping):
        return [flag, json.dumps(value)] if flag in kept else []
    return [] if value is None else [flag, str(value)]


def config_file(path: str, title: str, flag_of: Callable[[str, object], list[str]]) -> list[str]:
    """A YAML ``--config`` file as flags: each ``key: value`` through *flag_of* (the engine's
    spelling of a key); read bounded (a FIFO or /dev/zero is refused at once) with the rule
    files' safe YAML (no aliases, depth-limited). *title* names the engine in messages."""
    from .._files import ReadError, read_bounded
    from ..dsl.files import YamlError, load_located

    file = expand_user(path)
    try:
        text = read_bounded(file, _MAX_CONFIG_BYTES).decode("utf-8")
        data = load_located(text, f"--config `{path}`").data
    except ReadError as exc:
        reason = "larger than 1 MiB" if exc.too_large else f"cannot be read ({exc.reason})"
        raise UsageError(f"--config `{path}`: {reason}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--config `{path}`: not UTF-8 text") from None
    except YamlError as exc:
        d = exc.diagnostic
        where = f" at line {d.line}" if d.line else ""
        raise UsageError(f"--config `{path}`: not valid YAML{where}: {d.message}") from None
    if data is None:
        return []
    if not isinstance(data, Mapping):
        raise UsageError(f"--config `{path}`: expected a mapping of {title} flag names to values")
    tokens: list[str] = []
    for key, value in data.items():
        tokens += flag_of(str(key), value)
    return tokens


def _shown(names: Sequence[str]) -> tuple[str, int]:
    shown = ", ".join(
        f"`{n if len(n) <= _FLAG_SHOWN else n[: _FLAG_SHOWN - 3] + '...'}`" for n in names[:_IGNORED_SHOWN]
    )
    return shown, len(names) - _IGNORED_SHOWN


def ignored_note(ignored: Sequence[str]) -> str:
    """The one warning for a serve line's ignored flags: each name once, the first
    :data:`_IGNORED_SHOWN` of them, each cut to :data:`_FLAG_SHOWN` characters, and how many more."""
    shown, more = _shown(list(dict.fromkeys(ignored)))
    tail = f" and {more} more" if more > 0 else ""
    return f"serve line: flags that decide no kernel, ignored: {shown}{tail}"


def unknown_note(flags: Sequence[str], parser: str, options: Collection[str]) -> str:
    """The one warning for a launch line's flags that are no option of the engine's *parser*
    (which refuses such a line), with the option the first one likely meant."""
    names = list(dict.fromkeys(flags))
    shown, more = _shown(names)
    hint = did_you_mean(names[0], sorted(options))
    tail = (f" and {more} more" if more > 0 else "") + (f" (did you mean `{hint[0]}`?)" if hint else "")
    return f"serve line: not options of {parser}, which refuses the line; ignored: {shown}{tail}"
