"""Python's argparse as an engine's own launch parser reads a token: the oracle the spelling tests
hold kernelpolicy's line reader to (vLLM's FlexibleArgumentParser and SGLang's parser keep
argparse's abbreviations). Built from a release's scanned option strings, each dest one action."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import NoReturn

__all__ = ["Refused", "oracle", "reads", "spellings"]


class Refused(Exception):
    """argparse refused the token (an ambiguous abbreviation)."""


class _Argparse(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Refused(message)


def oracle(options: Mapping[str, str]) -> argparse.ArgumentParser:
    """A parser declaring every option string of *options* (option -> dest), grouped by dest."""
    parser = _Argparse(add_help=False, exit_on_error=False)
    by_dest: dict[str, list[str]] = {}
    for option, dest in options.items():
        by_dest.setdefault(dest, []).append(option)
    for dest, names in by_dest.items():
        parser.add_argument(*names, dest=dest, nargs="?")
    return parser


def reads(parser: argparse.ArgumentParser, token: str) -> str | None:
    """The dest argparse sets from ``token VALUE``; None: no option; raises :class:`Refused`: ambiguous."""
    try:
        ns, _ = parser.parse_known_args([token, "VALUE"])
    except argparse.ArgumentError as exc:  # Python 3.13+: raised, not passed to error()
        raise Refused(str(exc)) from None
    return next((d for d, v in vars(ns).items() if v == "VALUE"), None)


def spellings(names: Iterable[str], options: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Every prefix (3 characters on) of *names* that the parser of *options* reads as their dest,
    and every one it refuses as ambiguous."""
    names = list(names)
    parser = oracle(options)
    dest = options[names[0]]
    accepted, refused = [], []
    for name in names:
        for end in range(3, len(name) + 1):
            prefix = name[:end]
            try:
                read = reads(parser, prefix)
            except Refused:
                refused.append(prefix)
                continue
            if read == dest:
                accepted.append(prefix)
    return list(dict.fromkeys(accepted)), list(dict.fromkeys(refused))
