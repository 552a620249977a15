"""Pure GPU arithmetic: capability to fact values, NVML codes to names, visible-device maps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..keys import GPU_FAMILIES, GPU_SMS

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "NVML_ARCH_NAMES",
    "arch_name",
    "capability_facts",
    "cuda_version_text",
    "torch_arch_ok",
    "visible_physical_indices",
]

#: ``nvmlDeviceGetArchitecture`` codes (nvidia-ml-py ``NVML_DEVICE_ARCH_*``).
NVML_ARCH_NAMES: dict[int, str] = {
    2: "kepler",
    3: "maxwell",
    4: "pascal",
    5: "volta",
    6: "turing",
    7: "ampere",
    8: "ada",
    9: "hopper",
    10: "blackwell",
    13: "rubin",
}
#: Archs with ``tcgen05`` (TMEM) MMA. sm12x never has it; sm110 (Thor) is left unknown.
_TCGEN05 = {"sm100": True, "sm103": True, "sm80": False, "sm86": False, "sm87": False}
_TCGEN05 |= {"sm89": False, "sm90": False, "sm120": False, "sm121": False}


def arch_name(code: int) -> str | None:
    return NVML_ARCH_NAMES.get(code)


def capability_facts(major: int, minor: int) -> dict[str, object]:
    """``gpu.sm``, ``gpu.family``, ``gpu.cc`` and ``gpu.has_tcgen05`` of a capability.

    ``gpu.sm`` and ``gpu.family`` are left out when kernelpolicy does not know the value
    (an older or newer GPU); ``gpu.cc`` is always there.
    """
    sm, family = f"sm{major}{minor}", f"sm{major}0"
    out: dict[str, object] = {"gpu.cc": f"{major}.{minor}"}
    if sm in GPU_SMS:
        out["gpu.sm"] = sm
    if family in GPU_FAMILIES:
        out["gpu.family"] = family
    if sm in _TCGEN05:
        out["gpu.has_tcgen05"] = _TCGEN05[sm]
    return out


def cuda_version_text(code: int) -> str:
    """NVML's integer CUDA version (``13000``) as text (``13.0``)."""
    return f"{code // 1000}.{code % 1000 // 10}"


def torch_arch_ok(arch_list: Sequence[str], major: int, minor: int) -> bool:
    """Torch has code that runs on (*major*, *minor*).

    SASS ``sm_Mm'`` runs on the same major with minor >= m' (GB10, 12.1, runs sm_120);
    ``compute_Mm'`` PTX is JIT-compiled by the driver for any later capability. Arch-specific
    ``a``/``f`` targets carry no such guarantee and are ignored.
    """
    for item in arch_list:
        kind, _, num = item.partition("_")
        if not num.isdigit() or len(num) < 2:
            continue
        m_major, m_minor = int(num[:-1]), int(num[-1])
        if kind == "sm" and m_major == major and m_minor <= minor:
            return True
        if kind == "compute" and (m_major, m_minor) <= (major, minor):
            return True
    return False


def visible_physical_indices(env_value: str | None, count: int, uuids: Sequence[str]) -> list[int]:
    """Physical NVML indices of the CUDA-visible devices, in CUDA order.

    NVML ignores ``CUDA_VISIBLE_DEVICES``; CUDA reads it left to right and stops at the
    first entry it cannot match (an index out of range, an unknown UUID, ``-1``). Entries
    may be indices or (prefixes of) ``GPU-…`` UUIDs. Unset means every device.
    """
    if env_value is None:
        return list(range(count))
    out: list[int] = []
    for raw in env_value.split(","):
        item = raw.strip()
        if not item:
            break
        if item.lstrip("-").isdigit():
            idx = int(item)
            if not 0 <= idx < count:
                break
        else:
            prefix = item if item.startswith(("GPU-", "MIG-")) else f"GPU-{item}"
            found = [i for i, u in enumerate(uuids) if u.startswith(prefix)]
            if len(found) != 1:
                break
            idx = found[0]
        if idx in out:
            break
        out.append(idx)
    return out
