"""A disk cache of the costly providers' results, keyed by what they depend on.

The key covers the driver, the device (also a cheap identity of the NVIDIA devices this
machine has, read on every run without NVML: :func:`device_identity`), the package versions
and builds, and the Python; any change makes the stored results stale, and they are gathered
again. Every cached value is checked on read: it must be a valid value of a fact key the
provider that stored it provides, from a known source; an entry that fails is ignored (status
``invalid``, with the reason) and rewritten. The file is read only if it is a regular file of
at most :data:`MAX_BYTES`, in a folder this user owns and no one else may write (a shared
``0777`` folder, or another user's, is neither read nor written: the facts it would give could
be anyone's). A cache that cannot be read or written is ignored (and said so), never an error.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..._files import ReadError, owned_folder, read_bounded, read_owned
from ..._paths import cache_subdir
from ...errors import FactError
from ..record import SOURCES, normalise_value
from ._base import ProviderResult

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_BYTES",
    "SCHEMA",
    "CacheRead",
    "cache_key",
    "check_result",
    "default_cache_dir",
    "device_identity",
    "read_cache",
    "write_cache",
]

SCHEMA = "kernelpolicy.facts-cache/1"
_FILE = "machine-facts.json"
#: The largest cache file read (probe records included, it takes a few kB).
MAX_BYTES: Final = 1_000_000
_NVIDIA_VENDOR: Final = "0x10de"
_PCI: Final = Path("/sys/bus/pci/devices")


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """``facts`` under kernelpolicy's cache folder (``$KERNELPOLICY_CACHE_DIR``, else the
    user cache folder: ``$XDG_CACHE_HOME/kernelpolicy``, ``~/.cache/kernelpolicy``)."""
    return cache_subdir("facts", env)


def cache_key(parts: Mapping[str, object]) -> str:
    """Pure: a stable digest of *parts* (JSON-ready data)."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def device_identity(pci_root: Path = _PCI) -> list[str]:
    """The NVIDIA PCI devices of this machine (``slot:device-id``), read from sysfs on every run.

    Costs a few small file reads (no NVML, no CUDA), so a cache cannot outlive the GPU it
    describes even where NVML is not available. Empty where sysfs is not (not Linux).
    """
    out: list[str] = []
    try:
        entries = sorted(os.listdir(pci_root))
    except OSError:
        return out
    for slot in entries:
        try:
            vendor = read_bounded(pci_root / slot / "vendor", 64).decode().strip()
            if vendor != _NVIDIA_VENDOR:
                continue
            device = read_bounded(pci_root / slot / "device", 64).decode().strip()
        except (ReadError, UnicodeDecodeError):
            continue
        out.append(f"{slot}:{device}")
    return out


class CacheRead:
    """What a read found: the results (empty when none could be used) and why."""

    def __init__(self, results: dict[str, ProviderResult], status: str, problem: str | None = None) -> None:
        self.results = results
        #: ``hit``, ``missing``, ``stale``, ``unreadable``, ``invalid`` or ``refresh``
        self.status = status
        self.problem = problem  #: what was wrong with an ``unreadable`` or ``invalid`` cache


def check_result(name: str, result: ProviderResult, provides: Mapping[str, tuple[str, ...]] | None) -> str | None:
    """Pure: what is wrong with a cached *result* of provider *name*, or ``None``."""
    if provides is not None and name not in provides:
        return f"results of an unknown provider `{name}`"
    for key, value in result.values.items():
        if provides is not None and key not in provides[name]:
            return f"`{key}` is not a fact the `{name}` provider gives"
        try:
            normalise_value(key, value)
        except FactError as exc:
            return f"`{key}`: {exc.message}"
        if result.sources.get(key) not in SOURCES:
            return f"`{key}` has no valid source"
    return None


def read_cache(cache_dir: Path, key: str, provides: Mapping[str, tuple[str, ...]] | None = None) -> CacheRead:
    """The cached results of *key*, every value checked (see :func:`check_result`).

    :param provides: provider name -> the fact keys it may give; ``None`` skips that check.
    """
    path = cache_dir / _FILE
    try:
        data = json.loads(read_owned(cache_dir, _FILE, MAX_BYTES))
    except ReadError as exc:
        if exc.errno == errno.ENOENT:
            return CacheRead({}, "missing")
        return CacheRead({}, "unreadable", f"`{path}`: {exc.reason}")
    except (ValueError, RecursionError):
        return CacheRead({}, "unreadable", f"`{path}`: not JSON")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return CacheRead({}, "unreadable", f"`{path}`: not a facts cache")
    if data.get("key") != key:
        return CacheRead({}, "stale")
    results: dict[str, ProviderResult] = {}
    stored = data.get("results")
    if not isinstance(stored, dict):
        return CacheRead({}, "invalid", f"`{path}`: no results")
    for name, item in stored.items():
        try:
            result = ProviderResult.from_json(item)
        except (ValueError, AttributeError):
            return CacheRead({}, "invalid", f"`{path}`: a malformed `{name}` entry")
        problem = check_result(str(name), result, provides)
        if problem:
            return CacheRead({}, "invalid", f"`{path}`: {problem}")
        results[str(name)] = result
    return CacheRead(results, "hit")


def write_cache(
    cache_dir: Path, key: str, parts: Mapping[str, object], results: Mapping[str, ProviderResult]
) -> str | None:
    """Store *results* under *key*, atomically; the reason it could not, or ``None``."""
    data = {
        "schema": SCHEMA,
        "key": key,
        "parts": dict(parts),
        "results": {name: r.to_json() for name, r in results.items()},
    }
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not owned_folder(cache_dir):
            return f"cache: not written to `{cache_dir}` (the folder is not this user's alone)"
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".machine-facts-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1, sort_keys=True, default=str)
            os.replace(tmp, cache_dir / _FILE)  # also replaces a FIFO or a bad file planted there
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        return f"cache: not written to `{cache_dir}` ({(exc.strerror or str(exc)).lower()})"
    return None
