"""Repeated options read in linear time.

argparse (Python 3.11) finds each option's next neighbour by scanning every option of the line,
so a command line's parse is quadratic in its options: 20,000 ``--fact`` options took 9-12 s.
:func:`parse` takes the plain ``--name VALUE`` / ``--name=VALUE`` occurrences of the chosen
subcommand's repeatable options (``action="append"``, one value, no type or choices) out of the
line before argparse reads it, and appends them after, in order. A line with few of them is
parsed as it is.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Final

__all__ = ["LIFT_FROM", "parse"]

#: Repeated options on a line before they are taken out of it (below, argparse reads them).
LIFT_FROM: Final = 64


def _appends(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> tuple[argparse.ArgumentParser, set[argparse.Action], int]:
    """The (sub)command *argv* names, its repeatable one-value options, and where its own
    options start."""
    at = 0
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or at >= len(argv) or argv[at] not in subs[0].choices:
            break
        parser = subs[0].choices[argv[at]]
        at += 1
    out: set[argparse.Action] = set()
    for action in parser._actions:
        plain = action.nargs is None and action.type is None and action.choices is None
        if isinstance(action, argparse._AppendAction) and plain:
            out.add(action)
    return parser, out, at


def _lift(
    sub: argparse.ArgumentParser, appends: set[argparse.Action], tokens: list[str]
) -> tuple[list[tuple[argparse.Action, str]], list[str]]:
    """The repeatable options' values in *tokens* (up to ``--``; abbreviated or not, as the
    subcommand's parser reads each token), and the tokens left."""
    lifted: list[tuple[argparse.Action, str]] = []
    rest: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            return lifted, rest + tokens[i:]
        action, explicit = _option(sub, token)
        if action in appends and explicit is not None:
            lifted.append((action, explicit))
        elif action in appends and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            lifted.append((action, tokens[i + 1]))
            i += 1
        else:
            rest.append(token)
        i += 1
    return lifted, rest


def _option(sub: argparse.ArgumentParser, token: str) -> tuple[argparse.Action | None, str | None]:
    """The option *token* is to *sub*'s parser (its whole name, or the one option it is an
    unambiguous prefix of, as ``allow_abbrev`` reads it) and its ``=VALUE``; ``(None, None)``
    for anything else (an ambiguous prefix is left to argparse, which says so)."""
    if not token.startswith("--") or token == "--":
        return None, None
    name, eq, value = token.partition("=")
    options = sub._option_string_actions
    if name not in options:
        fits = [o for o in options if o.startswith(name)] if sub.allow_abbrev else []
        if len(fits) != 1:
            return None, None
        name = fits[0]
    return options[name], (value if eq else None)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with many repeated options read in linear time."""
    sub, appends, start = _appends(parser, argv)
    lifted, rest = _lift(sub, appends, list(argv[start:]))
    if len(lifted) < LIFT_FROM:
        return parser.parse_args(argv)
    args = parser.parse_args([*argv[:start], *rest])
    for action, value in lifted:
        setattr(args, action.dest, [*(getattr(args, action.dest, None) or []), value])
    return args
