"""The shape of an engine's one flag table: each flag that bears on a kernel decision, how the
command line spells it and where the engine's live config object holds it.

The CLI reads a flag from argv (:mod:`kernelpolicy.deployment.serve`) and the engine's plugin
reads the same entry from the config object the engine built (:func:`config_values`); both pass
the values through the engine's one ``facts_of``. So a flag the CLI reads and the plugin cannot
is a missing ``config`` path here, which the parity tests (tests/vllm, tests/sglang) catch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Flag", "config_values"]


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
