"""The shape of one engine's spec: what kernelpolicy knows of an inference engine, in one place.

A spec holds the engine's flag table (:mod:`.table`), how its launch line starts and how its own
parser reads the rest, its environment prefix, how it quantizes an unquantized checkpoint on
``--quantization``, its known releases, and how a decision reads as its flags. The fact assembly
(:mod:`kernelpolicy.deployment`), the renderers and the tools ask the registry
(:mod:`kernelpolicy.releases`) for a spec by name; none of them names an engine.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .table import Flag

if TYPE_CHECKING:
    from ..decision import PathDecision
    from ..policy import EngineMap
    from .line import LineValues

__all__ = ["EngineSpec", "FactView", "deep_gemm_use"]


class FactView(Protocol):
    """What a renderer reads of a decision's facts (``Facts`` or a plain mapping)."""

    def get(self, key: str) -> object: ...


class EngineSpec:
    """One engine. Subclasses set the class attributes and implement the three readers."""

    #: the name in rules (``deploy.engine``), on ``--engine NAME==X.Y.Z`` and in the vocabulary file
    name: ClassVar[str]
    #: the name as messages write it (``vLLM``)
    title: ClassVar[str]
    #: the flags that bear on a kernel decision, with the engine's spellings
    flags: ClassVar[tuple[Flag, ...]]
    #: command words that start its launch line (``("vllm", "serve")``)
    commands: ClassVar[tuple[tuple[str, ...], ...]]
    #: modules ``python -m`` runs to start it
    modules: ClassVar[tuple[str, ...]]
    #: its launch line as a usage message writes it
    usage: ClassVar[str]
    #: how ``explain`` starts a whole launch line of it, before the model
    launch: ClassVar[str]
    #: what ``explain`` says its plugin does, before the install line
    plugin_does: ClassVar[str]
    #: the prefix of the environment variables it reads (``VLLM_``)
    env_prefix: ClassVar[str]
    #: whether the rules read every variable of :attr:`env_prefix` that bears on a kernel (a
    #: variable of it no rule reads is then worth a warning)
    env_complete: ClassVar[bool] = False
    #: ``--quantization`` of an unquantized checkpoint: method -> the quantization facts it sets
    online: ClassVar[Mapping[str, Mapping[str, object]]]
    #: a checkpoint's ``quant_method`` -> the ``--quantization`` values the engine accepts for it
    #: (vLLM's names; SGLang takes the checkpoint's method under the same ones)
    compatible: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "gptq": ("gptq", "gptq_marlin", "marlin"),
        "awq": ("awq", "awq_marlin", "marlin"),
        "modelopt": ("modelopt", "modelopt_fp4", "modelopt_mxfp8"),
        "fp8": ("fp8", "ptpc_fp8"),
    }
    #: the pip requirement of one release (``vllm=={version}``)
    requirement: ClassVar[str]

    @property
    def serve_defaults(self) -> dict[str, Any]:
        """What a whole launch line means by leaving a flag out (the engine's defaults)."""
        return {f.dest: f.default for f in self.flags if f.default is not None}

    def backend_name(self, value: object) -> str | None:
        """The engine's reading of a backend flag's value (``--moe-backend TRITON``): lower case,
        ``-`` as ``_``; ``auto`` (the engine's own choice) and None are no backend."""
        if value is None:
            return None
        name = str(value).lower().replace("-", "_")
        return None if name == "auto" else name

    def spelled_flag(self, token: str) -> str:
        """*token* as the engine's parser reads a long flag's name before matching it (as written;
        vLLM reads ``_`` as ``-``)."""
        return token

    def read_line(
        self, rest: list[str], positional: str | None, env: dict[str, str], release: str | None
    ) -> LineValues:
        """The flags of a launch line (the tokens after its command; *positional* its model when
        written first), read as the engine's parser of *release* reads them.

        :raises UsageError: the engine refuses the line.
        """
        raise NotImplementedError

    def facts_of(self, values: Mapping[str, Any], vocabulary: EngineMap | None) -> dict[str, Any]:
        """The facts the engine's flag *values* (by ``dest``) set; *vocabulary* is the engine's
        section of the rules (``rules/engines/<name>.yaml``), for its backend names."""
        raise NotImplementedError

    def render(
        self,
        paths: Mapping[str, PathDecision],
        vocabulary: EngineMap,
        release: str | None,
        facts: FactView | None,
    ) -> dict[str, Any]:
        """``{"env": {...}, "args": [...], "notes": [...]}`` that reproduce *paths* on the engine
        (its *release*, the newest known when None), without the kernelpolicy plugin."""
        raise NotImplementedError

    def unread_env(self, version: str, names: Sequence[str]) -> Mapping[str, str]:
        """Of the variables *names* (without the ``deploy.env.`` prefix), those *version* does
        not read -> the releases that do; an engine whose releases say nothing of it: none."""
        return {}

    def env_value(self, name: str, raw: str, version: str | None) -> str:
        """The variable *name*'s value *raw* as the engine's *version* parses it (``00`` is ``0``
        for a switch read as ``bool(int(...))``); as given where the engine's reading is not known.

        :raises ValueError: a value the release refuses (the engine stops there), with its message.
        """
        return raw

    def releases(self) -> Sequence[str]:
        """The releases kernelpolicy knows, oldest first."""
        return tuple(self.records())

    def records(self) -> Mapping[str, Mapping[str, Any]]:
        """Each scanned release's record (``releases.json``: what it pins, reads and offers)."""
        raise NotImplementedError

    @property
    def data_file(self) -> Path:
        """The generated file of its scanned releases (``<engine>/releases.json``)."""
        return Path(__file__).with_name(self.name) / "releases.json"

    def published(self) -> Mapping[str, tuple[str, ...]]:
        """Package -> the releases the package index listed when :attr:`data_file` was written
        (the engine's own and the kernel packages it pins), as the index wrote them."""
        return _published(self.data_file)

    def known(self, version: str) -> str | None:
        """The release kernelpolicy knows that *version* names (``0.34`` is ``0.34.0``), as the
        release data writes it; None when it knows none."""
        from packaging.version import Version

        releases = self.releases()
        if version in releases:
            return version
        try:
            wanted = Version(version)
        except ValueError:  # not a version (InvalidVersion), or one of 5,000 digits
            return None
        return next((r for r in releases if Version(r) == wanted), None)


@functools.cache
def _published(path: Path) -> Mapping[str, tuple[str, ...]]:
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return {package: tuple(versions) for package, versions in data.get("published", {}).items()}


def deep_gemm_use(paths: Mapping[str, PathDecision]) -> tuple[bool, bool, bool]:
    """Whether dense and MoE run DeepGEMM, and whether they do with none of its kernels warmed."""
    dense, moe = paths["dense"], paths["moe"]
    warm = set(paths["warmup"].kernels or ())
    deep_gemm = ("deep_gemm", "flashinfer_deep_gemm")
    jit = {f"{p.backend}.{name}" for name, p in (("dense", dense), ("moe", moe)) if p.backend in deep_gemm}
    return dense.backend in deep_gemm, moe.backend == "deep_gemm", bool(jit) and not jit & warm
