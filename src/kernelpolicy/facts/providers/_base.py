"""The provider interface: what a fact provider declares and what it hands back."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "COSTS",
    "Context",
    "Cost",
    "Provider",
    "ProviderResult",
    "Runner",
    "ScriptRun",
    "Source",
]

#: What running a provider costs, cheapest first.
#:
#: ``static``: reads files and package metadata, imports nothing heavy.
#: ``nvml``: talks to the driver through NVML; creates no CUDA context.
#: ``subprocess``: runs Python in a child (e.g. imports torch there); touches no GPU.
#: ``probe``: a live check in a child, with a timeout: may create a CUDA context or JIT-compile.
Cost = Literal["static", "nvml", "subprocess", "probe"]
COSTS: tuple[Cost, ...] = ("static", "nvml", "subprocess", "probe")

#: Where one fact came from (a subset of :data:`kernelpolicy.facts.record.SOURCES`).
Source = Literal["nvml", "torch", "metadata", "probe", "catalog", "user"]


@dataclass(frozen=True)
class ScriptRun:
    """What a child process left behind: exit status and output, or that it timed out."""

    returncode: int | None  #: ``None`` when it timed out; negative: killed by that signal
    stdout: str
    stderr: str
    timed_out: bool = False
    seconds: float = 0.0


#: Runs ``[python, script, *args]`` with *env* and a timeout; never raises for a child's failure.
Runner = Callable[[Sequence[str], Mapping[str, str], float], ScriptRun]


def _default_runner(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> ScriptRun:
    from ._subprocess import run_script

    return run_script(argv, env, timeout)


@dataclass(frozen=True)
class Context:
    """What a provider may use: the environment, the facts found so far, and how to run a child.

    Providers run in order; :attr:`known` holds what earlier ones found (e.g. ``gpu.sm`` for a
    probe that needs the arch).
    """

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    known: Mapping[str, object] = field(default_factory=dict)
    python: str = sys.executable
    timeout_s: float = 300.0
    runner: Runner = _default_runner

    def with_known(self, known: Mapping[str, object]) -> Context:
        return Context(self.env, dict(known), self.python, self.timeout_s, self.runner)


@dataclass
class ProviderResult:
    """Facts found by one provider, each with its source, and human notes on what was not."""

    values: dict[str, object] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: raw outputs worth keeping (probe records); JSON-ready
    raw: dict[str, object] = field(default_factory=dict)

    def put(self, key: str, value: object, source: Source) -> None:
        """Record *value* for *key* from *source*; ``None`` means unknown and is skipped."""
        if value is not None:
            self.values[key] = value
            self.sources[key] = source

    def to_json(self) -> dict[str, object]:
        return {
            "values": dict(self.values),
            "sources": dict(self.sources),
            "notes": list(self.notes),
            "raw": dict(self.raw),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ProviderResult:
        values, sources, notes, raw = (
            data.get("values"),
            data.get("sources"),
            data.get("notes"),
            data.get("raw", {}),
        )
        if not (
            isinstance(values, dict) and isinstance(sources, dict) and isinstance(notes, list) and isinstance(raw, dict)
        ):
            raise ValueError("malformed provider result")
        return cls(dict(values), {str(k): str(v) for k, v in sources.items()}, list(notes), raw)


class Provider(Protocol):
    """A source of facts: it declares its keys and cost, and collects them on demand."""

    @property
    def name(self) -> str: ...

    @property
    def provides(self) -> tuple[str, ...]: ...

    @property
    def cost(self) -> Cost: ...

    def collect(self, ctx: Context) -> ProviderResult: ...
