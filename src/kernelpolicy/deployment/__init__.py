"""The deployment: the one place a :class:`~kernelpolicy.facts.Facts` record is assembled.

Every caller (``explain`` and ``vllm audit`` through :mod:`.options`, both engine plugins, fleet,
the matrix, the golden cases, the conformance sweeps) turns what it knows about one deployment
into facts here, in one order (a later layer wins over an earlier one):

1. *defaults*: tensor and expert parallel size 1, the engine vLLM, no speculative decoding,
   decode context parallel, two-batch overlap or disaggregation (:mod:`.pipeline`), where
   nothing below sets them;
2. *machine*: what this machine or a fleet node reported (``--gpu auto``; :func:`.build.on_machine`);
3. *model and GPU*: a GPU spec, the model's config.json and its catalog entry (:mod:`.build`),
   or what an engine's plugin read from its config (its platform, packages and model);
4. *engine config*: the engine's flags, from its live config object (a plugin) through the
   engine's one flag table (:mod:`kernelpolicy.releases.vllm.flags`);
5. *env*: the process environment a loaded rule reads, and ``KERNELPOLICY_FACTS`` (:mod:`.pipeline`);
   a ``KERNELPOLICY_FACTS`` value that contradicts the engine's config is a conflict: reported
   (a warning on stderr, in the plugin's status), and the engine's value decides, alike in the
   plugin and in ``explain`` given the launch line;
6. *overrides*: ``--fact``, ``--env``, ``--moe-backend``, ``--allow``, ``--engine`` (source ``user``);
   on the command line the engine's flags (a launch line, through the same table: :mod:`.serve`)
   are stated by the user and sit here.

The checkpoint's quantization (``--quantization``) is applied last, as the engine applies it, and
the GPU facts of every layer must agree.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .build import facts_for, model_facts
    from .pipeline import BuiltFacts, build_facts

__all__ = ["BuiltFacts", "build_facts", "facts_for", "model_facts"]

_WHERE = {"BuiltFacts": "pipeline", "build_facts": "pipeline", "facts_for": "build", "model_facts": "build"}


def __getattr__(name: str) -> Any:
    """The names above, loaded on first use (the CLI imports one module of this package at start-up)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
