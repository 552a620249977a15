"""Host facts: CPU architecture, operating system, Python."""

from __future__ import annotations

import platform

from ._base import Context, Cost, ProviderResult

__all__ = ["HostProvider", "normalise_machine"]

_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def normalise_machine(raw: str) -> str | None:
    """``platform.machine()`` as a ``host.machine`` value; ``None`` for other CPUs."""
    return _MACHINES.get(raw.lower())


class HostProvider:
    name = "host"
    cost: Cost = "static"
    provides = ("host.machine", "host.system", "host.python")

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        raw = platform.machine()
        machine = normalise_machine(raw)
        if machine is None:
            res.notes.append(f"host: CPU architecture `{raw}` is not one kernelpolicy knows")
        res.put("host.machine", machine, "metadata")
        res.put("host.system", platform.system() or None, "metadata")
        res.put("host.python", platform.python_version(), "metadata")
        return res
