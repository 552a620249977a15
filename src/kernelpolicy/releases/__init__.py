"""Engines as data: one spec per inference engine, behind one registry.

Each engine's package here holds everything kernelpolicy knows of it: its flag table
(``<engine>/flags.py``: each flag that bears on a kernel decision, its spellings and where the
engine's config object holds it), its spec (``<engine>/spec.py``: how its launch line starts and
how its own parser reads it, its ``--config`` file, its online quantization, a decision as its
own flags), and its releases as scanned from their wheels (``releases.json``, read by
``<engine>/versions.py``; written by ``<engine>/_scan.py``, never edited). Data and pure
functions only: nothing here imports an engine.

The fact assembly (:mod:`kernelpolicy.deployment`), the renderers and the tools ask this
registry for an engine by name (:func:`spec`), by the command that starts its launch line
(:func:`command_of`), or by an ``--engine NAME==X.Y.Z`` value (:func:`parse_engine`); none of
them names an engine. The plugins (:mod:`kernelpolicy.engines`) sit above and read the same
tables from the engine's live config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, NamedTuple

from ..errors import UsageError

if TYPE_CHECKING:
    from .engine import EngineSpec

__all__ = [
    "DEFAULT",
    "NAMES",
    "EngineRelease",
    "command_of",
    "parse_engine",
    "spec",
    "specs",
    "title",
]

#: The engines kernelpolicy knows, in the order messages list them.
NAMES: Final = ("vllm", "sglang")
#: The engine of a deployment that names none, whose flags are ``explain``'s own options and
#: whose line a bare ``-- MODEL [FLAGS]`` is.
DEFAULT: Final = "vllm"
_TITLES: Final = {"vllm": "vLLM", "sglang": "SGLang"}


def spec(name: str) -> EngineSpec:
    """The spec of engine *name*.

    :raises KeyError: *name* is not in :data:`NAMES`.
    """
    if name == "vllm":
        from .vllm.spec import VLLM

        return VLLM
    if name == "sglang":
        from .sglang.spec import SGLANG

        return SGLANG
    raise KeyError(name)


def specs() -> tuple[EngineSpec, ...]:
    """Every engine's spec, in :data:`NAMES` order."""
    return tuple(spec(n) for n in NAMES)


def title(name: str) -> str:
    """*name* as messages write it (``vLLM``), without loading its spec; *name* itself when unknown."""
    return _TITLES.get(name, name)


def command_of(tokens: Sequence[str]) -> tuple[EngineSpec, int]:
    """The engine a launch line starts and how many of *tokens* its command takes: ``vllm
    serve``, ``sglang serve``, ``python -m MODULE`` (any ``python*`` interpreter, by name or
    path) of an engine's module; a line with no command is :data:`DEFAULT`'s (``-- MODEL -tp 2``).

    :raises UsageError: the line starts an engine's word without its command, or runs a module
        of no engine.
    """
    for engine in specs():
        for words in engine.commands:
            if tuple(tokens[: len(words)]) == words:
                return engine, len(words)
            if tokens and tokens[0] == words[0]:
                raise UsageError(f"serve line: expected `{engine.usage}`", help="the command after `--`")
    if len(tokens) >= 3 and tokens[0].rsplit("/", 1)[-1].startswith("python") and tokens[1] == "-m":
        for engine in specs():
            if tokens[2] in engine.modules:
                return engine, 3
        starts = ", ".join(f"`{' '.join(e.commands[0])}`, `python -m {e.modules[0]}`" for e in specs())
        titles = ", ".join(e.title for e in specs())
        raise UsageError(
            f"serve line: `{tokens[0]} -m {tokens[2]}` starts no engine kernelpolicy knows ({titles})",
            help=f"expected {starts}",
        )
    return spec(DEFAULT), 0


class EngineRelease(NamedTuple):
    """An ``--engine`` value: the engine and its release."""

    name: str
    version: str


def parse_engine(value: str, *, known: bool = True, where: str = "--engine") -> EngineRelease:
    """The one reader of an ``--engine NAME==X.Y.Z`` value (and a golden case's ``engine``).

    :param known: require a release kernelpolicy knows (its scanned releases, or a published
        release older than every one of them: answered with a warning, :mod:`.range`).
    :param where: what the value was given as, for messages.
    :raises UsageError: *value* is not of that form, names no engine kernelpolicy knows, or
        (with *known*) a release it has not scanned, naming the known ones.
    """
    forms = " or ".join(f"`{n}==X.Y.Z`" for n in NAMES)
    name, sep, version = value.strip().partition("==")
    name, version = name.strip().lower(), version.strip()
    if not sep or not version or name not in NAMES:
        raise UsageError(f"{where} `{value}` is not of the form {forms}")
    if known:
        engine = spec(name)
        release = engine.known(version)
        if release is None:
            from .range import older_than_modelled

            if older_than_modelled(name, version, published=True):
                return EngineRelease(name, version)  # answered, with a word that it is not modelled

            releases = ", ".join(engine.releases())
            article = "an" if engine.title[0] in "AEFHILMNORSX" else "a"  # as the letter is said: an SGLang
            raise UsageError(
                f"{where} `{value}`: not {article} {engine.title} release kernelpolicy knows (known: {releases})"
            )
        version = release
    return EngineRelease(name, version)
