"""Where the modelled engine releases start, and what an answer for an older release rests on.

kernelpolicy models the vLLM and SGLang releases scanned from their wheels (each engine spec's
``records()``): their defaults, flags and the kernel packages they pin. A published release older
than the oldest of them (vLLM before 0.24, SGLang before 0.5.12) is accepted, but its answer uses
the shipped rules and default orders (written for the modelled releases) with the packages it
pins unknown; :func:`unmodelled_warning` says so in one line. Data and pure functions only: what
an engine is comes from its spec (:func:`kernelpolicy.releases.spec`), never a copy here.
"""

from __future__ import annotations

import functools

from packaging.version import Version

from . import NAMES, spec

__all__ = ["older_than_modelled", "oldest_modelled", "unmodelled_warning"]


@functools.cache
def oldest_modelled(engine: str) -> Version | None:
    """The oldest scanned release of *engine* (``None``: not an engine kernelpolicy models)."""
    if engine not in NAMES:
        return None
    return min((Version(v) for v in spec(engine).records()), default=None)


@functools.cache
def _published(engine: str) -> frozenset[Version]:
    out: set[Version] = set()
    for v in spec(engine).published().get(engine, ()):
        try:
            out.add(Version(v))
        except ValueError:  # InvalidVersion, or more digits than int() converts
            continue
    return frozenset(out)


def _pinned(engine: str) -> str:
    """The packages the modelled releases of *engine* pin, as the warning names them."""
    names: dict[str, None] = {}
    for record in spec(engine).records().values():
        names.update(dict.fromkeys(record.get("requires", {})))
    return ", ".join(sorted(names)) or "its kernel packages"


def older_than_modelled(engine: str, version: str, *, published: bool = False) -> bool:
    """Whether *version* of *engine* comes before the oldest modelled release (with *published*:
    and is a release the package index listed when the data was scanned)."""
    oldest = oldest_modelled(engine)
    try:
        v = Version(str(version).strip())
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return False
    if oldest is None or v >= oldest:
        return False
    return not published or v in _published(engine)


def unmodelled_warning(engine: str, version: str) -> str | None:
    """One line saying that *engine* *version* is older than the modelled releases and what the
    answer then rests on, or ``None`` when it is not older."""
    if not older_than_modelled(engine, version):
        return None
    name, oldest = spec(engine).title, oldest_modelled(engine)
    return (
        f"{name} `{version}` is older than the oldest release kernelpolicy models ({name} {oldest}): "
        f"this answer uses the shipped rules and the default orders of the modelled releases, and the "
        f"packages `{version}` pins ({_pinned(engine)}) are unknown; state them with --fact "
        f"(the assumptions list what they would settle)"
    )
