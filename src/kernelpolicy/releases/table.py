"""The shape of an engine's one flag table: each flag that bears on a kernel decision, how the
command line spells it and where the engine's live config object holds it.

The CLI reads a flag from argv (:mod:`kernelpolicy.deployment.serve`) and the engine's plugin
reads the same entry from the config object the engine built (:func:`config_values`); both pass
the values through the engine's one ``facts_of``. So a flag the CLI reads and the plugin cannot
is a missing ``config`` path here, which the parity tests (tests/vllm, tests/sglang) catch.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import UsageError

__all__ = ["Flag", "config_values", "full_spellings"]


@dataclass(frozen=True)
class Flag:
    """One engine flag."""

    names: tuple[str, ...]  #: argv spellings, the canonical one first
    dest: str  #: the engine's own name for the value (its argument / config field name)
    help: str
    type: Callable[[str], Any] = str
    store_true: bool = False
    #: also an option of ``kernelpolicy explain`` (False: declared elsewhere, or not an option)
    native: bool = True
    metavar: str = "VALUE"
    #: where the engine's live config object holds the value (dotted attributes); None: the
    #: flag only locates the model (a revision, a download folder) or is read otherwise
    config: str | None = None
    #: turns the config attribute into the flag's value (``lora_config`` -> ``enable_lora``)
    from_config: Callable[[Any], Any] | None = None
    #: the engine's value when a whole serve line leaves the flag out (None: none a rule reads,
    #: or one that depends on the machine)
    default: Any = None
    #: a value the parity tests set on a serve line (``None`` for a switch)
    sample: str | None = None


def _attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    return obj


def config_values(config: Any, flags: Iterable[Flag]) -> dict[str, Any]:
    """``{dest: value}`` of every flag with a ``config`` path, read from *config* (the engine's
    config object); a value that is ``None`` there is left out, as a flag not given."""
    out: dict[str, Any] = {}
    for flag in flags:
        if flag.config is None:
            continue
        value = _attr(config, flag.config)
        if flag.from_config is not None:
            value = flag.from_config(value)
        if value is not None:
            out[flag.dest] = value
    return out


#: The options an ambiguity message names before "and N more".
_AMBIGUOUS_SHOWN: Final = 4


def full_spellings(tokens: Sequence[str], options: Collection[str], parser: str) -> list[str]:
    """*tokens* of a launch line with each option written out as an argparse parser of
    *options* with ``allow_abbrev`` (argparse's default, SGLang's launch parser) reads it.

    Argparse reads every token before ``--`` that starts with ``--`` as an option: an exact
    option string (``--tp-size``, ``--tp-size=8``) is kept, a prefix of exactly one option string
    is that option (``--tp 8`` is ``--tp-size 8``, ``--tp=8`` is ``--tp-size=8``), and one of no
    option string is an unknown flag (kept: the reader names it ignored). Values and
    single-dash tokens are kept as they are.

    :param options: every option string of the engine's parser, not only the kernel flags: a
        prefix is unambiguous only against all of them.
    :param parser: the parser as messages name it (``SGLang 0.5.23``).
    :raises UsageError: a token is a prefix of several options, which argparse refuses
        ("ambiguous option").
    """
    out = list(tokens)
    ordered: list[str] | None = None
    for i, token in enumerate(out):
        if token == "--":
            break
        if not token.startswith("--") or token in options:
            continue
        prefix, eq, value = token.partition("=")
        if prefix in options:
            continue
        ordered = sorted(options) if ordered is None else ordered
        start = bisect.bisect_left(ordered, prefix)  # the options starting with it are a run from here
        end = start
        while end < len(ordered) and ordered[end].startswith(prefix):
            end += 1
        matches = ordered[start:end]
        if len(matches) == 1:
            out[i] = matches[0] + eq + value
        elif matches:
            shown = ", ".join(f"`{m}`" for m in matches[:_AMBIGUOUS_SHOWN])
            more = len(matches) - _AMBIGUOUS_SHOWN
            shown += f" and {more} more" if more > 0 else ""
            raise UsageError(
                f"serve line: ambiguous option `{prefix}`, which {parser} refuses: it could match {shown}",
                help="write the option out in full",
            )
    return out
