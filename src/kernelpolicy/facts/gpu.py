"""GPU facts from a spec (``sm121``, ``12.1``, ``121``, a product name) or a capability."""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import FactError, UnknownGPUError, did_you_mean
from .keys import GPU_SMS

__all__ = [
    "GpuProduct",
    "check_gpu_facts",
    "derived_gpu_facts",
    "facts_from_capability",
    "facts_from_spec",
    "parse_products",
    "product_names",
]

_CC_RE: Final = re.compile(r"\A(?:sm_?|compute_?)?(\d{1,2})(?:\.(\d)|(\d))?([af])?\Z", re.I | re.ASCII)


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
    derived = derived_gpu_facts(sm)
    out: dict[str, object] = {k: derived[k] for k in ("gpu.sm", "gpu.family", "gpu.cc")}
    if name:
        out["gpu.name"] = name
    return out


#: Words NVML and ``nvidia-smi`` add to a product's name for its board, memory and power
#: variant ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "H200 NVL", "NVIDIA RTX PRO 6000
#: Blackwell Max-Q Workstation Edition", "NVIDIA B300 SXM6 AC"): none of them changes the chip.
_VARIANT: Final = re.compile(
    r"\b(?:\d+ ?gb?|hbm\d*e?|pcie|sxm\d*|nvl\d*|max q|(?:workstation|server) edition|laptop gpu|ac)\b"
)
#: Vendor words of AMD Instinct and Radeon parts (``MI300X``, ``gfx942``, ``AMD Instinct MI355X``).
_AMD: Final = re.compile(r"\b(?:amd|instinct|radeon|mi\d{2,3}[a-z]?|gfx\d{3,4}[a-z]?)\b", re.I)


@functools.lru_cache(maxsize=1024)
def _norm(text: str) -> str:
    """A product name as the catalog keys it: case, separators, the ``NVIDIA``/``GeForce``
    prefixes and the variant words of :data:`_VARIANT` left out (cached: ``fleet`` reads a name
    per node file)."""
    low = re.sub(r"[\s_\-]+", " ", text.strip().lower()).removeprefix("nvidia ").removeprefix("geforce ")
    return re.sub(r" +", " ", _VARIANT.sub(" ", low)).strip() or low.strip()


def product_names(products: Sequence[GpuProduct]) -> Mapping[str, GpuProduct]:
    """Every name and alias of *products*, normalised (:func:`_norm`), to its product (made
    once per catalog: ``fleet`` reads it for every node file)."""
    return _names(tuple(products))


@functools.lru_cache(maxsize=8)
def _names(products: tuple[GpuProduct, ...]) -> Mapping[str, GpuProduct]:
    names: dict[str, GpuProduct] = {}
    for p in products:
        for alias in (p.name, *p.aliases):
            names[_norm(alias)] = p
    return types.MappingProxyType(names)


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
    names = product_names(products)
    product = names.get(want)
    if product is None:
        if _AMD.search(text):
            raise UnknownGPUError(spec, reason="AMD GPUs are not supported (kernelpolicy decides NVIDIA CUDA kernels)")
        raise UnknownGPUError(spec, did_you_mean(want, names))
    out = facts_from_spec(product.sm)
    out["gpu.name"] = product.name
    if product.host_machine:
        out["host.machine"] = product.host_machine
    if product.unified_memory is not None:
        out["gpu.unified_memory"] = product.unified_memory
    return out


#: SMs without FP8 tensor-core MMA (Ampere), and those with tcgen05 MMA (datacenter Blackwell).
_NO_FP8: Final = frozenset({"sm80", "sm86", "sm87"})
_TCGEN05: Final = frozenset({"sm100", "sm103"})


def derived_gpu_facts(sm: str) -> dict[str, Any]:
    """Pure: the GPU facts *sm* (one of :data:`GPU_SMS`) settles: its family, compute
    capability and MMA features (``rules/implies/gpu.yaml`` says the same, with its reasons;
    a test keeps the two in step)."""
    major, minor = _cc_of(sm)
    return {
        "gpu.sm": sm,
        "gpu.family": f"sm{major}0",
        "gpu.cc": f"{major}.{minor}",
        "gpu.has_fp8": sm not in _NO_FP8,
        "gpu.has_tcgen05": sm in _TCGEN05,
    }


def _cc_of(sm: str) -> tuple[int, int]:
    digits = sm.removeprefix("sm")
    return int(digits[:-1]), int(digits[-1])


def _product(name: str, products: Sequence[GpuProduct]) -> GpuProduct | None:
    return product_names(products).get(_norm(name))


def _disagreements(values: Mapping[str, object], products: Sequence[GpuProduct]) -> list[tuple[str, str, str]]:
    """Pairs of GPU facts that contradict each other: ``(key, other key, what other implies)``."""
    out: list[tuple[str, str, str]] = []
    sm, family, cc, name = (values.get(k) for k in ("gpu.sm", "gpu.family", "gpu.cc", "gpu.name"))
    product = _product(name, products) if isinstance(name, str) else None
    if product is not None:
        if isinstance(sm, str) and sm != product.sm:
            out.append(("gpu.sm", "gpu.name", f"an {product.sm} GPU"))
        elif isinstance(cc, str) and cc != derived_gpu_facts(product.sm)["gpu.cc"]:
            out.append(("gpu.cc", "gpu.name", f"an {product.sm} GPU"))
    if isinstance(sm, str) and sm in GPU_SMS:
        derived = derived_gpu_facts(sm)
        if isinstance(family, str) and family != derived["gpu.family"]:
            out.append(("gpu.family", "gpu.sm", f"family {derived['gpu.family']}"))
        if isinstance(cc, str) and cc != derived["gpu.cc"]:
            out.append(("gpu.cc", "gpu.sm", f"cc {derived['gpu.cc']}"))
        for key in ("gpu.has_fp8", "gpu.has_tcgen05"):
            given = values.get(key)
            if isinstance(given, bool) and given != derived[key]:
                out.append((key, "gpu.sm", f"`{key}` is {str(derived[key]).lower()} on {sm}"))
    elif isinstance(cc, str) and isinstance(family, str) and family != f"sm{cc.split('.')[0]}0":
        out.append(("gpu.family", "gpu.cc", f"family sm{cc.split('.')[0]}0"))
    return out


def check_gpu_facts(
    values: Mapping[str, object], sources: Mapping[str, str], products: Sequence[GpuProduct] = ()
) -> None:
    """Pure: the GPU facts that derive from each other agree (``gpu.sm``, ``gpu.family``,
    ``gpu.cc``, the MMA features of :func:`derived_gpu_facts`, and ``gpu.name`` where it names
    a product of the GPU catalog).

    :raises FactError: naming the fact a user gave (``--fact``) where one of the two was.
    """
    for key, other, implied in _disagreements(values, products):
        blamed, by = (other, key) if sources.get(other) == "user" and sources.get(key) != "user" else (key, other)
        note = f" ({implied})" if blamed == key else ""
        raise FactError(
            blamed,
            f"`{values[blamed]}` contradicts `{by}` = `{values[by]}`{note}",
            help="name the GPU once, with --gpu",
        )
