"""Whole numbers as the user types them: ASCII digits only.

Python's ``int()`` reads any Unicode decimal digit (``int("２") == 2``) and ``re``'s ``\\d``
matches them too, so ``--gpu １２.１``, ``-tp ２`` and ``--fact deploy.tp=８`` were read as
``sm121``, TP 2 and 8. A number on kernelpolicy's command line, in a fact or a launch line is
written in ASCII digits; anything else is refused, never read as a number it resembles.
"""

from __future__ import annotations

import argparse
import re
from typing import Final

__all__ = ["ascii_int", "flag_int", "is_ascii_int"]

#: An optional sign, then ASCII digits (``1_000`` and blanks inside are not numbers here either).
_INT: Final = re.compile(r"[+-]?[0-9]+\Z")


def is_ascii_int(text: str) -> bool:
    """*text* (blanks around it ignored) is a whole number in ASCII digits."""
    return _INT.match(text.strip()) is not None


def ascii_int(text: str) -> int:
    """*text* as an integer, written in ASCII digits.

    :raises ValueError: anything else (``２``, ``1_0``, ``1.0``, ``""``), as ``int()`` raises.
    """
    if not is_ascii_int(text):
        raise ValueError(f"invalid literal for a whole number in ASCII digits: {text!r}")
    return int(text)


def flag_int(text: str) -> int:
    """:func:`ascii_int` as an argparse ``type``: its error names the value, in backticks."""
    try:
        return ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:40]}` is not a whole number (ASCII digits)") from None
