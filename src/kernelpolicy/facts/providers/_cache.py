"""A disk cache of the costly providers' results, keyed by what they depend on.

The key covers the driver, the device, the package versions and builds, and the Python; any
change makes the stored results stale, and they are gathered again. A cache that cannot be
read or written is ignored (and said so), never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ._base import ProviderResult

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SCHEMA", "CacheRead", "cache_key", "default_cache_dir", "read_cache", "write_cache"]

SCHEMA = "kernelpolicy.facts-cache/1"
_FILE = "machine-facts.json"


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """``$KERNELPOLICY_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernelpolicy``, else ``~/.cache/…``."""
    if env.get("KERNELPOLICY_CACHE_DIR"):
        return Path(env["KERNELPOLICY_CACHE_DIR"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "kernelpolicy"


def cache_key(parts: Mapping[str, object]) -> str:
    """Pure: a stable digest of *parts* (JSON-ready data)."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


class CacheRead:
    """What a read found: the results (empty when none could be used) and why."""

    def __init__(self, results: dict[str, ProviderResult], status: str) -> None:
        self.results = results
        self.status = status  #: ``hit``, ``missing``, ``stale``, ``unreadable`` or ``refresh``


def read_cache(cache_dir: Path, key: str) -> CacheRead:
    path = cache_dir / _FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CacheRead({}, "missing")
    except (OSError, ValueError):
        return CacheRead({}, "unreadable")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return CacheRead({}, "unreadable")
    if data.get("key") != key:
        return CacheRead({}, "stale")
    results: dict[str, ProviderResult] = {}
    stored = data.get("results")
    if not isinstance(stored, dict):
        return CacheRead({}, "unreadable")
    for name, item in stored.items():
        try:
            results[str(name)] = ProviderResult.from_json(item)
        except (ValueError, AttributeError):
            return CacheRead({}, "unreadable")
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
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".machine-facts-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True, default=str)
        os.replace(tmp, cache_dir / _FILE)
    except OSError as exc:
        return f"cache: not written to `{cache_dir}` ({exc.strerror or exc})"
    return None
