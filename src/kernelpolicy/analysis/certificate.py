"""The proof of a set of rule files, kept as data: computed once per content, then reused.

A *certificate* is what ``check`` found for exact file contents and options: its findings, the
size of what it verified, and the groups of cells it walked, each with its outcome (the backend
each path chooses there) and the rules it depends on (those that reject a candidate judged
before the chosen one). It is stored as JSON under ``<cache root>/check/`` (no pickle; nothing
in it is code), named by a key that hashes the files' content, layers and names, the options
that change the result (``--explicit``, the files under check) and the source of the code that
computes it (the compiler, :mod:`kernelpolicy.semantics`, the resolver and this package), so a
changed file or a changed checker never reads an old proof.

The file is a header line (format, key, the SHA-256 of the rest) and the body. On read the
digest is recomputed and every field is checked for its type; an entry that fails any check,
is not a regular file or is larger than :data:`MAX_ENTRY_BYTES` is not trusted: the caller
computes the proof again and rewrites it. The folder keeps the newest :data:`MAX_ENTRIES`.

One proof of a content is computed at a time: ``check`` holds a lock named by the key while it
walks (:func:`computing`), so a second check of the same files (the pre-commit hook beside an
editor's, the test suite beside the walk it started in the background) waits for the first and
reads its certificate instead of walking every cell again.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .._files import ReadError, owned_folder, read_owned, write_private
from .._paths import cache_subdir
from .._version import __version__
from ..dsl.files import SourceError, SourceFile
from .findings import CODES, Finding

__all__ = [
    "FORMAT",
    "MAX_ENTRIES",
    "MAX_ENTRY_BYTES",
    "Certificate",
    "certificate_key",
    "computing",
    "read",
    "read_groups",
    "write",
]

FORMAT: Final = "kernelpolicy.certificate/2"
#: The largest file read: an entry (findings and summary: kilobytes) or its groups, compressed
#: (the shipped tables with the example policy: ~775,000 groups, about 20 MB).
MAX_ENTRY_BYTES: Final = 64_000_000
#: The most bytes the groups of one proof decompress to.
MAX_GROUPS_BYTES: Final = 1_000_000_000
#: The most proofs kept (each edit of a rule file makes a new one).
MAX_ENTRIES: Final = 12

_PKG: Final = Path(__file__).resolve().parent.parent
#: the code whose output a certificate records (besides the rule compiler)
_CODE: Final = (
    "analysis",
    "dsl",
    "facts",
    "deployment",
    "engines",
    "releases",
    "policy.py",
    "semantics.py",
    "resolver.py",
    "decision.py",
)


@dataclass
class Certificate:
    """What a check of some files found: findings, the summary of the walk, and its groups
    (``[path, backend or None, cells, [class ...], [rule it depends on ...]]``, as indexes into
    :attr:`names`). The entry holds the findings and summary (read by every reuse); the groups
    are written beside it, compressed, and read only by :func:`read_groups`."""

    key: str
    findings: list[Finding] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    groups: list[list[Any]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  #: classes (``dimension=label``) and rule ids
    #: the SHA-256 of the groups' compressed file beside the entry (``None``: not kept)
    groups_sha256: str | None = None


def _code_stamp() -> bytes:
    """The source of the code a proof depends on, by content (not by time: a fresh install of
    the same release, in CI say, reads the proofs its previous run cached)."""
    h = hashlib.sha256(f"{FORMAT}|{__version__}|{sys.version_info[:2]}".encode())
    for rel in _CODE:
        p = _PKG / rel
        # the code, and the release data `check` reads (``unknown-release``)
        for f in sorted([*p.rglob("*.py"), *p.rglob("*.json")]) if p.is_dir() else [p]:
            h.update(f"\0{f.relative_to(_PKG)}\0".encode() + f.read_bytes())
    return h.hexdigest().encode()


def certificate_key(files: Iterable[SourceFile], *, explicit: bool, subject: Sequence[str] | None) -> str | None:
    """The key of the proof of *files* with these options (``None``: a file cannot be read)."""
    h = hashlib.sha256(_code_stamp())
    h.update(f"\0explicit={explicit}\0subject={json.dumps(sorted(subject) if subject is not None else None)}".encode())
    for src in files:
        try:
            data = src.read_bytes()
        except SourceError:
            return None
        h.update(f"\0{src.layer}\0{src.display}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def folder() -> Path:
    """Where certificates are kept: ``check`` under the cache root."""
    return cache_subdir("check")


def _entry(where: Path, key: str) -> Path:
    return where / f"certificate-{key}.json"


def _groups_entry(where: Path, key: str) -> Path:
    return where / f"certificate-{key}.groups.json.gz"


def read(key: str, where: Path | None = None) -> Certificate | None:
    """The certificate of *key* (its findings and summary; the groups stay on disk, see
    :func:`read_groups`), or ``None`` when there is none or it is not valid: a folder or entry
    another user owns or may write is never believed (a planted certificate would hide
    findings), as for the compiled-policy cache."""
    target = _entry(where or folder(), key)
    try:
        raw = read_owned(target.parent, target.name, MAX_ENTRY_BYTES)
        head, _, body = raw.partition(b"\n")
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key:
            return None
        if header.get("sha256") != hashlib.sha256(body).hexdigest():
            return None  # changed since it was written: never trusted
        return _decode(key, json.loads(body))
    except ReadError:
        return None
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def read_groups(key: str, where: Path | None = None) -> Certificate | None:
    """The certificate of *key* with its groups, read back from their compressed file, which
    must be the one the entry names (by SHA-256); ``None`` when either is missing or not valid."""
    where = where or folder()
    cert = read(key, where)
    target = _groups_entry(where, key)
    if cert is None or cert.groups_sha256 is None:
        return None
    try:
        raw = read_owned(target.parent, target.name, MAX_ENTRY_BYTES)
        if hashlib.sha256(raw).hexdigest() != cert.groups_sha256:
            return None
        data = zlib.decompressobj(wbits=31).decompress(raw, MAX_GROUPS_BYTES)
        groups, names = _decode_groups(json.loads(data))
    except ReadError:
        return None
    except (ValueError, TypeError, KeyError, RecursionError, zlib.error):
        return None
    return Certificate(key, cert.findings, cert.summary, groups, names, cert.groups_sha256)


def write(cert: Certificate, where: Path | None = None) -> None:
    """Store *cert* atomically, then keep the newest entries; a folder that cannot be written
    is left alone (the next run computes the proof again)."""
    where = where or folder()
    groups = json.dumps({"groups": cert.groups, "names": cert.names}, separators=(",", ":")).encode()
    packed = gzip.compress(groups, compresslevel=6, mtime=0)
    kept = len(packed) <= MAX_ENTRY_BYTES and write_private(where, _groups_entry(where, cert.key).name, packed)
    cert.groups_sha256 = hashlib.sha256(packed).hexdigest() if kept else None
    body = json.dumps(_encode(cert), separators=(",", ":")).encode()
    header = json.dumps({"format": FORMAT, "key": cert.key, "sha256": hashlib.sha256(body).hexdigest()}).encode()
    blob = header + b"\n" + body
    if len(blob) > MAX_ENTRY_BYTES:
        return
    if write_private(where, _entry(where, cert.key).name, blob):
        _prune(where)


@contextlib.contextmanager
def computing(key: str, where: Path | None = None) -> Iterator[None]:
    """Hold the lock of *key*'s proof while computing it: another process computing the same
    proof is waited for (its certificate is then there to read). Where no lock can be taken (a
    folder that is not this user's alone, a platform without ``flock``), nothing is waited for.

    The lock file is removed when the proof is done: a process that waited on it reads the
    certificate written meanwhile, and one that comes later finds the certificate first (were
    none written, two later checks might walk at once: work done twice, never a wrong proof)."""
    try:
        import fcntl  # noqa: PLC0415 (POSIX only)
    except ImportError:
        yield
        return
    where = where or folder()
    lock = where / f".lock-{key}"
    fd = -1
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        if owned_folder(where):
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        if fd >= 0:
            os.close(fd)
        fd = -1
    try:
        yield
    finally:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(lock)
            os.close(fd)  # closing releases the lock


def _prune(where: Path, keep: int = MAX_ENTRIES) -> None:
    """Keep the newest *keep* entries and their groups; delete the rest (groups without an entry too)."""
    try:
        with os.scandir(where) as it:
            names = {e.name: e.stat(follow_symlinks=False).st_mtime_ns for e in it if e.name.startswith("certificate-")}
    except OSError:
        return
    entries = sorted((t, n) for n, t in names.items() if n.endswith(".json"))
    kept = {n.removesuffix(".json") for _, n in entries[-keep:]} if keep > 0 else set()
    for n in names:
        if n.removesuffix(".groups.json.gz").removesuffix(".json") not in kept:
            with contextlib.suppress(OSError):
                os.unlink(where / n)


# --------------------------------------------------------------------------- encoding

_FIELDS: Final = (
    ("file", str),
    ("line", int),
    ("column", int),
    ("rule", str),
    ("help", str),
    ("cell", str),
    ("cells", int),
    ("source_line", str),
    ("span", int),
    ("field", str),
)


def _encode(cert: Certificate) -> dict[str, Any]:
    findings = []
    for f in cert.findings:
        item: dict[str, Any] = {"code": f.code, "level": f.level, "message": f.message}
        for name, _ in _FIELDS:
            v = getattr(f, name)
            if v is not None:
                item[name] = v
        findings.append(item)
    return {"findings": findings, "summary": cert.summary, "groups_sha256": cert.groups_sha256}


def _typed(v: Any, kind: type, what: str) -> Any:
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise TypeError(f"{what}: expected {kind.__name__}")
    return v


def _decode(key: str, data: Any) -> Certificate:
    data = _typed(data, dict, "body")
    findings = []
    for raw in _typed(data["findings"], list, "findings"):
        item = _typed(raw, dict, "finding")
        code = _typed(item["code"], str, "code")
        level = _typed(item["level"], str, "level")
        if code not in CODES or level not in ("error", "warning"):
            raise ValueError("finding: unknown code or level")
        extra = {name: _typed(item[name], kind, name) for name, kind in _FIELDS if name in item}
        if set(item) - {"code", "level", "message"} - set(extra):
            raise ValueError("finding: unknown field")
        findings.append(Finding(code, _typed(item["message"], str, "message"), level, **extra))
    summary = _summary(_typed(data["summary"], dict, "summary"))
    sha = data.get("groups_sha256")
    return Certificate(key, findings, summary, groups_sha256=None if sha is None else _typed(sha, str, "groups_sha256"))


def _decode_groups(data: Any) -> tuple[list[list[Any]], list[str]]:
    data = _typed(data, dict, "groups file")
    names = [_typed(n, str, "name") for n in _typed(data["names"], list, "names")]
    groups = []
    for raw in _typed(data["groups"], list, "groups"):
        g = _typed(raw, list, "group")
        if len(g) != 5:
            raise ValueError("group: expected 5 items")
        path, backend, cells, classes, rules = g
        _typed(path, str, "group path")
        if backend is not None:
            _typed(backend, str, "group backend")
        _typed(cells, int, "group cells")
        for i in (*_typed(classes, list, "group classes"), *_typed(rules, list, "group rules")):
            if not 0 <= _typed(i, int, "group name") < len(names):
                raise ValueError("group: a name out of range")
        groups.append(g)
    return groups, names


def _summary(s: Mapping[str, Any]) -> dict[str, Any]:
    """A walk's summary, each field checked (see :func:`kernelpolicy.analysis.checking.summary`)."""
    out: dict[str, Any] = {}
    for name, kind in (("cells", int), ("resolves", int), ("skipped", int), ("pruned", int)):
        out[name] = _typed(s[name], kind, name)
    seconds = s["seconds"]
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        raise TypeError("seconds: expected a number")
    out["seconds"] = float(seconds)
    groups = _typed(s["groups"], dict, "groups")
    out["groups"] = {_typed(k, str, "path"): _typed(v, int, "groups") for k, v in groups.items()}
    out["dimensions"] = [_typed(d, str, "dimension") for d in _typed(s["dimensions"], list, "dimensions")]
    base = s.get("certificate")
    out["certificate"] = None if base is None else _typed(base, str, "certificate")
    return out
