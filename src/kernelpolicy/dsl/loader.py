"""Find and load rule and policy files, through a cache of compiled policies.

Compiling the shipped tables (YAML, schema validation, conditions) is the slow part of a cold
``explain``; its result is pickled under the user cache folder, keyed by the content of every
file and by the compiler's own source, so any change to either compiles afresh. Errors are
never cached. ``KERNELPOLICY_NO_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from .._paths import default_policy_dir, shipped_rules_dir
from .._version import __version__
from ..policy import Policy
from ._source import SourceFile

__all__ = ["POLICY_ENV", "SourceFile", "cache_dir", "discover", "load_files", "load_policy"]

POLICY_ENV = "KERNELPOLICY_POLICY"
_CACHE_FORMAT = 1
_PKG = Path(__file__).resolve().parent.parent


def _yaml_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.y*ml") if p.is_file())


def discover(
    extra: Sequence[str | os.PathLike[str]] = (),
    *,
    shipped: bool = True,
    default_policy: bool = True,
    environ: bool = True,
) -> list[SourceFile]:
    """The files :func:`load_policy` reads, in load order (least authoritative first)."""
    out: list[SourceFile] = []
    if shipped:
        root = shipped_rules_dir()
        out += [SourceFile(p, f"rules/{p.relative_to(root).as_posix()}", "shipped") for p in _yaml_files(root)]
    if default_policy:
        root = default_policy_dir()
        if root.is_dir():
            out += [SourceFile(p, f"policy/{p.name}", "policy") for p in sorted(root.glob("*.y*ml")) if p.is_file()]
    named: list[str | os.PathLike[str]] = []
    if environ and os.environ.get(POLICY_ENV):
        named += [p for p in os.environ[POLICY_ENV].split(os.pathsep) if p]
    named += list(extra)
    for item in named:
        p = Path(item)
        files = _yaml_files(p) if p.is_dir() else [p]
        out += [SourceFile(f, str(f), "policy") for f in files]
    return out


def load_policy(
    paths: Sequence[str | os.PathLike[str]] = (),
    *,
    shipped: bool = True,
    default_policy: bool = True,
    environ: bool = True,
) -> Policy:
    """The shipped rules, the default policy, ``$KERNELPOLICY_POLICY`` and *paths*, loaded.

    :raises PolicyError: listing every problem in every file.
    """
    return load_files(discover(paths, shipped=shipped, default_policy=default_policy, environ=environ))


def cache_dir() -> Path:
    """Where compiled policies are kept (``$KERNELPOLICY_CACHE_DIR``, else the user cache)."""
    if os.environ.get("KERNELPOLICY_CACHE_DIR"):
        return Path(os.environ["KERNELPOLICY_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelpolicy" / "policies"


def _compiler_stamp() -> bytes:
    """Identifies the code that compiles rules, so a changed compiler never reads old output."""
    parts = [f"{_CACHE_FORMAT}|{__version__}|{sys.version_info[:2]}"]
    for rel in ("dsl", "policy.py", "facts/_keys.py", "facts/_record.py", "facts/gpu.py", "facts/model.py"):
        p = _PKG / rel
        for f in sorted(p.glob("*.py")) if p.is_dir() else [p]:
            st = f.stat()
            parts.append(f"{f.name}:{st.st_mtime_ns}:{st.st_size}")
    return "\n".join(parts).encode()


def load_files(files: Iterable[SourceFile]) -> Policy:
    """Load, check and compile *files* (see :func:`discover`) into one policy, using the cache."""
    files = list(files)
    use_cache = os.environ.get("KERNELPOLICY_NO_CACHE", "") in ("", "0")
    key = None
    if use_cache:
        h = hashlib.sha256(_compiler_stamp())
        try:
            for src in files:
                h.update(f"\0{src.layer}\0{src.display}\0".encode() + src.path.read_bytes())
        except OSError:
            use_cache = False  # let the compiler report the unreadable file
        key = h.hexdigest()
    target = cache_dir() / f"policy-{key}.pickle" if use_cache else None
    if target is not None:
        try:
            with target.open("rb") as fh:
                cached = pickle.load(fh)
            if isinstance(cached, Policy):
                return cached
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
            pass
    from ._compile import compile_files

    policy = compile_files(files)
    if target is not None:
        _store(target, policy)
    return policy


def _store(target: Path, policy: Policy) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".policy-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(policy, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
    except (OSError, pickle.PicklingError):
        pass  # a read-only home: compile every time
