"""GPU facts from a spec (``sm121``, ``12.1``, ``121``, a product name) or a capability."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import UnknownGPUError, did_you_mean
from ._keys import GPU_SMS

__all__ = ["GpuProduct", "facts_from_capability", "facts_from_spec", "parse_products"]

_CC_RE: Final = re.compile(r"\A(?:sm_?|compute_?)?(\d{1,2})(?:\.(\d)|(\d))?([af])?\Z", re.I)


@dataclass(frozen=True)
class GpuProduct:
    """One entry of the shipped GPU catalog (``rules/gpus.yaml``)."""

    name: str
    aliases: tuple[str, ...]
    sm: str
    host_machine: str | None = None
    unified_memory: bool | None = None
    source: str = ""


def parse_products(entries: Sequence[Mapping[str, Any]]) -> tuple[GpuProduct, ...]:
    """Catalog entries (already schema-checked) as :class:`GpuProduct` values."""
    return tuple(
        GpuProduct(
            name=e["name"],
            aliases=tuple(e.get("aliases", ())),
            sm=e["sm"],
            host_machine=e.get("host.machine"),
            unified_memory=e.get("unified_memory"),
            source=e.get("source", ""),
        )
        for e in entries
    )


def facts_from_capability(major: int, minor: int, name: str | None = None) -> dict[str, object]:
    """``gpu.*`` facts for an exact compute capability.

    :raises UnknownGPUError: for a capability kernelpolicy has no rules for.
    """
    sm = f"sm{major}{minor}"
    if sm not in GPU_SMS:
        raise UnknownGPUError(f"{major}.{minor}")
    out: dict[str, object] = {
        "gpu.sm": sm,
        "gpu.family": f"sm{major}0",
        "gpu.cc": f"{major}.{minor}",
    }
    if name:
        out["gpu.name"] = name
    return out


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.strip().lower()).removeprefix("nvidia ").strip()


def facts_from_spec(spec: str, products: Sequence[GpuProduct] = ()) -> dict[str, object]:
    """``gpu.*`` (and, for products, ``host.machine``) facts for a ``--gpu`` spec.

    :raises UnknownGPUError: when *spec* is neither a known capability nor a product.
    """
    text = spec.strip()
    m = _CC_RE.match(text)
    if m:
        major = int(m.group(1))
        minor_s = m.group(2) or m.group(3)
        if minor_s is None:  # "sm90", "90", "121" are digits only
            digits = m.group(1)
            major, minor_s = (int(digits[:-1]), digits[-1]) if len(digits) > 1 else (major, "0")
        try:
            return facts_from_capability(major, int(minor_s))
        except UnknownGPUError:
            raise UnknownGPUError(spec) from None
    want = _norm(text)
    names: dict[str, GpuProduct] = {}
    for p in products:
        for alias in (p.name, *p.aliases):
            names[_norm(alias)] = p
    product = names.get(want)
    if product is None:
        raise UnknownGPUError(spec, did_you_mean(want, names))
    out = facts_from_spec(product.sm)
    out["gpu.name"] = product.name
    if product.host_machine:
        out["host.machine"] = product.host_machine
    if product.unified_memory is not None:
        out["gpu.unified_memory"] = product.unified_memory
    return out
