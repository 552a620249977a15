"""Find installed packages without importing them: metadata versions and package folders."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
from pathlib import Path

from ..._files import ReadError, read_bounded

__all__ = ["MAX_SOURCE", "dist_version", "module_dir", "owning_dist", "read_assigned_string", "read_small_text"]

#: The largest file read from an installed package (a module's ``__init__.py``, ``VERSION``).
MAX_SOURCE = 1 << 20


def read_small_text(path: Path, limit: int = MAX_SOURCE) -> str | None:
    """The text of the regular file *path* (undecodable bytes replaced), or ``None`` when it is
    missing, not a regular file (a FIFO, a device) or larger than *limit* bytes."""
    try:
        return read_bounded(path, limit).decode("utf-8", errors="replace")
    except ReadError:
        return None


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
    """The string literal assigned to *name* in a Python file (``__version__ = '2.5.0'``); a
    FIFO, a device or a file over :data:`MAX_SOURCE` is not read (``None``)."""
    text = read_small_text(path)
    if text is None:
        return None
    m = re.search(rf"^{re.escape(name)}\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else None
