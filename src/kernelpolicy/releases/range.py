"""Where the modelled engine releases start, and what an answer for an older release rests on.

kernelpolicy models the vLLM and SGLang releases scanned from their wheels
(``releases/*/releases.json``): their defaults, flags and the kernel packages they pin. A
published release older than the oldest of them (vLLM before 0.24, SGLang before 0.5.12) is
accepted, but its answer uses the shipped rules and default orders (written for the modelled
releases) with the packages it pins unknown; :func:`unmodelled_warning` says so in one line.
Data and pure functions only.
"""

from __future__ import annotations

import functools
import json
from typing import Final

from packaging.version import Version

from . import title
from .sglang.versions import RELEASES_FILE as SGLANG_FILE
from .sglang.versions import release_records as sglang_records
from .vllm.versions import RELEASES_FILE as VLLM_FILE
from .vllm.versions import release_records as vllm_records

__all__ = ["older_than_modelled", "oldest_modelled", "unmodelled_warning"]

#: what each engine's releases pin that the rules read, as the warning names them
_PINS: Final = {
    "vllm": "FlashInfer, DeepGEMM, torch, Triton, CUTLASS DSL",
    "sglang": "FlashInfer, sgl-deep-gemm, torch",
}


@functools.cache
def oldest_modelled(engine: str) -> Version | None:
    """The oldest scanned release of *engine* (``None``: not an engine kernelpolicy models)."""
    records = vllm_records() if engine == "vllm" else sglang_records() if engine == "sglang" else {}
    return min((Version(v) for v in records), default=None)


@functools.cache
def _published(engine: str) -> frozenset[Version]:
    path = VLLM_FILE if engine == "vllm" else SGLANG_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    out: set[Version] = set()
    for v in data.get("published", {}).get(engine, []):
        try:
            out.add(Version(v))
        except ValueError:  # InvalidVersion, or more digits than int() converts
            continue
    return frozenset(out)


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
    name, oldest = title(engine), oldest_modelled(engine)
    return (
        f"{name} `{version}` is older than the oldest release kernelpolicy models ({name} {oldest}): "
        f"this answer uses the shipped rules and the default orders of the modelled releases, and the "
        f"packages `{version}` pins ({_PINS[engine]}) are unknown; state them with --fact "
        f"(the assumptions list what they would settle)"
    )
