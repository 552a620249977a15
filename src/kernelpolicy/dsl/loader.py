"""Find and load rule and policy files, through a cache of compiled policies.

Every file is read with a bound (:mod:`._source`: regular files only, at most 1 MB each,
folders walked without following links to folders). Compiling the shipped tables (YAML,
schema validation, conditions) is the slow part of a cold ``explain``; its result is kept as
plain JSON under ``<cache root>/policies`` (:mod:`._cache`), keyed by the content of every file
and by the compiler's own source, so any change to either compiles afresh. Errors are never
cached, and a cache entry that is not valid is ignored and rewritten. ``KERNELPOLICY_NO_CACHE=1``
turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .._paths import cache_subdir, default_policy_dir, shipped_rules_dir
from .._version import __version__
from ..errors import Diagnostic, PolicyError, UsageError
from ..policy import Policy
from ._source import SourceError, SourceFile, yaml_files_under

__all__ = [
    "NO_CACHE_ENV",
    "POLICY_ENV",
    "PolicyPaths",
    "SourceFile",
    "cache_dir",
    "discover",
    "env_policy_paths",
    "load_files",
    "load_policy",
    "use_caches",
]

POLICY_ENV = "KERNELPOLICY_POLICY"
NO_CACHE_ENV = "KERNELPOLICY_NO_CACHE"
_PKG = Path(__file__).resolve().parent.parent


def use_caches(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the compiled-policy and certificate caches are used: unless ``KERNELPOLICY_NO_CACHE``
    is on, read as every on/off variable is (:func:`kernelpolicy._flags.env_flag`: ``false``,
    ``no`` and ``off`` leave the caches on; they turned them off).

    :raises UsageError: a value that is neither on nor off (``maybe``).
    """
    from .._flags import env_flag

    return not env_flag(os.environ if environ is None else environ, NO_CACHE_ENV)


#: One policy path, or a sequence of them.
PolicyPaths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _as_paths(extra: PolicyPaths) -> list[str | os.PathLike[str]]:
    """*extra* as a list of paths: one path (a ``str`` is one path, not its characters) or many."""
    items = [extra] if isinstance(extra, (str, os.PathLike)) else list(extra)
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(
                f"kernelpolicy.load_policy: `paths` must be a path or a list of paths, not {type(item).__name__}"
            )
        if not os.fspath(item):
            raise UsageError("a policy path is empty", help="name a policy file or a folder of them")
    return items


def env_policy_paths() -> list[str]:
    """The policy files and folders ``$KERNELPOLICY_POLICY`` names (``os.pathsep``-separated,
    empty entries skipped): what every command and the engine plugins load on top of
    ``rules/`` and ``policy/``, before the files named on the command line."""
    return [p for p in os.environ.get(POLICY_ENV, "").split(os.pathsep) if p]


def _walk(root: Path, *, recursive: bool = True) -> list[Path]:
    try:
        return yaml_files_under(root, recursive=recursive)
    except SourceError as exc:
        raise PolicyError([exc.diagnostic]) from None


def discover(
    extra: PolicyPaths = (),
    *,
    shipped: bool = True,
    default_policy: bool = True,
    environ: bool = True,
) -> list[SourceFile]:
    """The files :func:`load_policy` reads, in load order (least authoritative first).

    :raises UsageError: for an empty path; :raises PolicyError: for a folder too large to be
        one of rule files.
    """
    named = _as_paths(extra)
    out: list[SourceFile] = []
    if shipped:
        root = shipped_rules_dir()
        out += [SourceFile(p, f"rules/{p.relative_to(root).as_posix()}", "shipped") for p in _walk(root)]
    if default_policy:
        root = default_policy_dir()
        if root.is_dir():
            out += [SourceFile(p, f"policy/{p.name}", "policy") for p in _walk(root, recursive=False)]
    if environ:
        named[:0] = env_policy_paths()
    for item in named:
        p = Path(item)
        files = _walk(p) if p.is_dir() else [p]
        if not files:
            raise PolicyError([Diagnostic("folder holds no policy files (*.yaml, *.yml)", file=str(p), code="io")])
        out += [SourceFile(f, str(f), "policy") for f in files]
    return out


def load_policy(
    paths: PolicyPaths = (),
    *,
    shipped: bool = True,
    default_policy: bool = True,
    environ: bool = True,
) -> Policy:
    """The shipped rules, the default policy, ``$KERNELPOLICY_POLICY`` and *paths*, loaded.

    *paths* is one policy file or folder, or a sequence of them.

    :raises PolicyError: listing every problem in every file.
    :raises UsageError: for an empty path.
    :raises TypeError: naming the parameter, for an argument of the wrong type.
    """
    from .._args import check_arg

    if not isinstance(paths, (str, os.PathLike, list, tuple)):
        check_arg("load_policy", "paths", paths, str, os.PathLike, list, tuple)
    for name, value in (("shipped", shipped), ("default_policy", default_policy), ("environ", environ)):
        check_arg("load_policy", name, value, bool)
    return load_files(discover(paths, shipped=shipped, default_policy=default_policy, environ=environ))


def cache_dir() -> Path:
    """Where compiled policies are kept: ``policies`` under the cache root (``$KERNELPOLICY_CACHE_DIR``)."""
    return cache_subdir("policies")


def _compiler_stamp() -> bytes:
    """Identifies the code that compiles rules, so a changed compiler never reads old output."""
    parts = [f"{__version__}|{sys.version_info[:2]}"]
    for rel in ("dsl", "policy.py", "facts", "engines"):
        p = _PKG / rel
        for f in sorted(p.glob("*.py")) if p.is_dir() else [p]:
            st = f.stat()
            parts.append(f"{f.name}:{st.st_mtime_ns}:{st.st_size}")
    return "\n".join(parts).encode()


def read_sources(files: Iterable[SourceFile]) -> list[tuple[SourceFile, bytes | Diagnostic]]:
    """Each file's bytes, or the diagnostic saying why it cannot be read."""
    out: list[tuple[SourceFile, bytes | Diagnostic]] = []
    for src in files:
        try:
            out.append((src, src.read_bytes()))
        except SourceError as exc:
            out.append((src, exc.diagnostic))
    return out


def load_files(files: Iterable[SourceFile]) -> Policy:
    """Load, check and compile *files* (see :func:`discover`) into one policy, using the cache."""
    from ._cache import read_entry, write_entry

    sources = read_sources(files)
    readable = [(src, data) for src, data in sources if isinstance(data, bytes)]
    use_cache = use_caches() and len(readable) == len(sources)
    key = None
    if use_cache:  # an unreadable file: compile, so that the error names it
        h = hashlib.sha256(_compiler_stamp())
        for src, data in readable:
            h.update(f"\0{src.layer}\0{src.display}\0{len(data)}\0".encode() + data)
        key = h.hexdigest()
        cached = read_entry(cache_dir(), key)
        if cached is not None:
            return cached
    from ._compile import compile_sources

    policy = compile_sources(sources)
    if key is not None:
        write_entry(cache_dir(), key, policy)
    return policy
