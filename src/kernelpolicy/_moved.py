"""Old module paths of the 0.1 layout, kept importable for one release.

The re-layout (issue 23) moved modules with ``git mv``; no file is left at an old path (so git
carries edits made meanwhile at the old path over to the new one). Instead this finder, installed
by ``import kernelpolicy``, answers an import of an old name with the module at its new path:
the *same* module object (``kernelpolicy.adapters.vllm is kernelpolicy.engines.vllm.plugin``), so
state, monkeypatching and ``isinstance`` behave as before. ``python -m`` with an old name runs the
new module. Remove in the release after next.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # the finder imports importlib's machinery only when an old path is imported
    import importlib.machinery
    import types
    from collections.abc import Sequence

__all__ = ["MOVED", "install"]

#: old module -> new module (``None``: a package that only held moved modules).
MOVED: Final[dict[str, str | None]] = {
    "kernelpolicy.adapters": None,
    "kernelpolicy.adapters.agreement": "kernelpolicy.engines.agreement",
    "kernelpolicy.adapters.summary": "kernelpolicy.render.summary",
    "kernelpolicy.adapters.vllm": "kernelpolicy.engines.vllm.plugin",
    "kernelpolicy.adapters.vllm._facts": "kernelpolicy.engines.vllm._facts",
    "kernelpolicy.adapters.vllm._scan": "kernelpolicy.releases.vllm._scan",
    "kernelpolicy.adapters.vllm._versions": "kernelpolicy.releases.vllm.versions",
    "kernelpolicy.adapters.vllm._names": "kernelpolicy.releases.vllm.names",
    "kernelpolicy.adapters.vllm._generate": "kernelpolicy.releases.vllm.generate",
    "kernelpolicy.adapters.sglang": "kernelpolicy.engines.sglang.plugin",
    "kernelpolicy.adapters.sglang._facts": "kernelpolicy.engines.sglang._facts",
    "kernelpolicy.adapters.sglang._scan": "kernelpolicy.releases.sglang._scan",
    "kernelpolicy.adapters.sglang._versions": "kernelpolicy.releases.sglang.versions",
    "kernelpolicy.adapters.sglang._names": "kernelpolicy.releases.sglang.names",
    "kernelpolicy.testing.vllm": "kernelpolicy.engines.vllm.testing",
    "kernelpolicy.testing.vllm._probe": "kernelpolicy.engines.vllm.testing._probe",
    "kernelpolicy.testing.vllm._sim": "kernelpolicy.engines._sim",
    "kernelpolicy.testing.sglang": "kernelpolicy.engines.sglang.testing",
    "kernelpolicy.testing.sglang._probe": "kernelpolicy.engines.sglang.testing._probe",
    "kernelpolicy.facts.build": "kernelpolicy.deployment.build",
    "kernelpolicy.facts.pipeline": "kernelpolicy.deployment.pipeline",
    "kernelpolicy.cli._serve": "kernelpolicy.deployment.serve",
    "kernelpolicy.cli._vllm_matrix": "kernelpolicy.engines.vllm.conformance",
    "kernelpolicy.cli._sglang_matrix": "kernelpolicy.engines.sglang.conformance",
    "kernelpolicy.explain": "kernelpolicy.render.explain",
    "kernelpolicy.fmt": "kernelpolicy.tools.fmt",
    "kernelpolicy.completion": "kernelpolicy.tools.completion",
    "kernelpolicy.matrix": "kernelpolicy.tools.matrix",
    "kernelpolicy.schemas": "kernelpolicy.tools.schemas",
    "kernelpolicy._output_models": "kernelpolicy.tools._output_models",
}


class _Alias:
    """The loader of an old name: the module at its new path (importlib's loader protocol)."""

    def __init__(self, target: str | None, *, parent: bool) -> None:
        self.target = target
        self.parent = parent
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        import importlib
        import types

        if self.target is None:
            module = types.ModuleType(spec.name, "moved: see kernelpolicy._moved")
            module.__path__ = []
            return module
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run (the module at the new path is imported); the import system set the
        old name's spec on it: put its own back."""
        if self.spec is not None:
            module.__spec__ = self.spec
        if self.parent and not hasattr(module, "__path__"):
            module.__path__ = []  # an old package (its old submodules are found by name)

    def get_code(self, fullname: str) -> types.CodeType | None:
        """The new module's code (``python -m`` with an old name)."""
        import importlib.util

        if self.target is None:
            return None
        spec = importlib.util.find_spec(self.target)
        loader = spec.loader if spec is not None else None
        get_code = getattr(loader, "get_code", None)
        return get_code(self.target) if get_code is not None else None


class _Finder:
    """Answers the old names of :data:`MOVED` (importlib's meta path finder protocol); any other
    name costs one dictionary lookup, and importlib's machinery is imported on the first old name."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        import importlib.machinery
        import importlib.util

        new = MOVED[fullname]
        parent = any(name.startswith(fullname + ".") for name in MOVED)
        spec = importlib.machinery.ModuleSpec(
            fullname,
            _Alias(new, parent=parent),  # type: ignore[arg-type]  # the loader protocol, without importlib.abc
            is_package=parent,
        )
        found = importlib.util.find_spec(new) if new is not None else None
        if found is not None and found.origin:
            spec.origin = found.origin  # `python -m OLD` runs the new file as __main__
            spec.has_location = True
        return spec


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
