"""Find installed packages without importing them: metadata versions and package folders."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
from pathlib import Path

__all__ = ["dist_version", "module_dir", "owning_dist", "read_assigned_string"]


def dist_version(dist: str) -> str | None:
    """The installed version of distribution *dist*, or ``None``."""
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def module_dir(name: str) -> Path | None:
    """The folder of top-level package *name*, found without importing it."""
    if "." in name:
        raise ValueError(f"`{name}` is not a top-level module")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def owning_dist(module: str) -> str | None:
    """The distribution that installed top-level *module* (first one, when several claim it)."""
    owners = md.packages_distributions().get(module) or []
    return owners[0] if owners else None


def read_assigned_string(path: Path, name: str) -> str | None:
    """The string literal assigned to *name* in a Python file (``__version__ = '2.5.0'``)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(rf"^{re.escape(name)}\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else None
