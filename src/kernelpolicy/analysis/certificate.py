"""The proof of a set of rule files, kept as data: computed once per content, then reused.

A *certificate* is what ``check`` found for exact file contents and options: its findings, the
size of what it verified, and each path's decision diagram (:mod:`.mdd`: the outcome of every
cell, tens of kilobytes). It is stored as JSON under ``<cache root>/check/`` (no pickle; nothing
in it is code), named by a key that hashes the files' content, layers and names, the options
that change the result (``--explicit``, the files under check) and the source of the code that
computes it (the compiler, :mod:`kernelpolicy.semantics`, the resolver and this package), so a
changed file or a changed checker never reads an old proof.

The key is computed from the very bytes the proof was made from (``check`` reads each file once,
:meth:`~kernelpolicy.dsl.files.SourceFile.pinned`): a file saved while a check runs never gets
the old content's proof under the new content's key.

The proof of the files a layer stands on may be kept without its findings (``null``: they were
not computed, see :class:`Certificate`): a layer reads its diagrams; a check of those files never
reuses it.

The file is a header line (format, key, the SHA-256 of the rest) and the body. On read the
digest is recomputed, every field is checked for its type and the diagrams for their structure
(levels increase from a node to its children, one child per class, children before parents,
terminals that are outcomes); an entry that fails any check, is not a regular file or is larger
than :data:`MAX_ENTRY_BYTES` is not trusted: the caller computes the proof again and rewrites
it. The folder keeps the newest :data:`MAX_ENTRIES`. A proof takes about a second, so none
waits for another: two checks of one content write the same certificate, atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .._files import ReadError, folder_refusal, read_owned, write_private
from .._paths import cache_subdir
from .._version import __version__
from ..dsl.files import SourceError, SourceFile
from .compile import Outcome
from .findings import CODES, Finding
from .mdd import Manager

__all__ = [
    "FORMAT",
    "MAX_ENTRIES",
    "MAX_ENTRY_BYTES",
    "Certificate",
    "certificate_key",
    "pinned",
    "read",
    "refusal",
    "write",
]

FORMAT: Final = "kernelpolicy.certificate/3"
#: The largest entry read (the shipped tables with the example policy: about 1 MB).
MAX_ENTRY_BYTES: Final = 64_000_000
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
    """What a check of some files found: findings, the summary of the proof, and its decision
    diagrams (:func:`kernelpolicy.analysis.checking.diagrams`: ``levels``, ``sizes``, ``nodes``
    and each path's root; a terminal is an outcome as a list).

    ``findings`` is ``None`` in the proof of files kept only as the ground of a layer
    (:func:`~kernelpolicy.analysis.checking.ground_proof`: their findings are not the layer's
    and were not computed); a ``check`` of those files themselves computes them and replaces it."""

    key: str
    findings: list[Finding] | None = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    diagrams: dict[str, Any] = field(default_factory=dict)


def pinned(files: Iterable[SourceFile]) -> list[SourceFile]:
    """*files*, each read now, once (see the module docstring)."""
    return [f.pinned() for f in files]


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


def refusal(where: Path | None = None) -> str | None:
    """Why the certificates folder is neither read nor written, in one line (a folder another
    user owns or may write: a planted certificate would hide findings); ``None`` when it is used."""
    where = where or folder()
    why = folder_refusal(where)
    return None if why is None else f"certificates in `{where}` are neither read nor kept: {why}"


def _entry(where: Path, key: str) -> Path:
    return where / f"certificate-{key}.json"


def read(key: str, where: Path | None = None) -> Certificate | None:
    """The certificate of *key*, or ``None`` when there is none or it is not valid: a folder or
    entry another user owns or may write is never believed (a planted certificate would hide
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


def write(cert: Certificate, where: Path | None = None) -> None:
    """Store *cert* atomically, then keep the newest entries; a folder that cannot be written
    is left alone (the next run computes the proof again)."""
    where = where or folder()
    body = json.dumps(_encode(cert), separators=(",", ":")).encode()
    header = json.dumps({"format": FORMAT, "key": cert.key, "sha256": hashlib.sha256(body).hexdigest()}).encode()
    blob = header + b"\n" + body
    if len(blob) > MAX_ENTRY_BYTES:
        return
    if write_private(where, _entry(where, cert.key).name, blob):
        _prune(where)


def _prune(where: Path, keep: int = MAX_ENTRIES) -> None:
    """Keep the newest *keep* entries; delete the rest (and what older formats left beside them)."""
    try:
        with os.scandir(where) as it:
            names = {e.name: e.stat(follow_symlinks=False).st_mtime_ns for e in it if e.name.startswith("certificate-")}
    except OSError:
        return
    entries = sorted((t, n) for n, t in names.items() if n.endswith(".json"))
    kept = {n for _, n in entries[-keep:]} if keep > 0 else set()
    for n in names:
        if n not in kept:
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
    if cert.findings is None:
        return {"findings": None, "summary": cert.summary, "diagrams": cert.diagrams}
    findings = []
    for f in cert.findings:
        item: dict[str, Any] = {"code": f.code, "level": f.level, "message": f.message}
        for name, _ in _FIELDS:
            v = getattr(f, name)
            if v is not None:
                item[name] = v
        findings.append(item)
    return {"findings": findings, "summary": cert.summary, "diagrams": cert.diagrams}


def _typed(v: Any, kind: type, what: str) -> Any:
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise TypeError(f"{what}: expected {kind.__name__}")
    return v


def _decode(key: str, data: Any) -> Certificate:
    data = _typed(data, dict, "body")
    summary = _summary(_typed(data["summary"], dict, "summary"))
    diagrams = _diagrams(_typed(data["diagrams"], dict, "diagrams"))
    if data["findings"] is None:  # the ground of a layer: its proof only
        if not diagrams:
            raise ValueError("a proof kept without findings keeps its diagrams")
        return Certificate(key, None, summary, diagrams)
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
    return Certificate(key, findings, summary, diagrams)


def _diagrams(data: Mapping[str, Any]) -> dict[str, Any]:
    """The diagrams of a certificate, their structure checked by loading them into a manager."""
    if not data:
        return {}
    levels = [_typed(n, str, "level") for n in _typed(data["levels"], list, "levels")]
    sizes = [_typed(n, int, "size") for n in _typed(data["sizes"], list, "sizes")]
    nodes = _typed(data["nodes"], list, "nodes")
    if len(levels) != len(sizes) or any(n < 1 for n in sizes):
        raise ValueError("diagrams: one size of at least one class per level")
    manager = Manager(sizes, budget=len(nodes) + 3)
    manager.load(data, outcome)
    return dict(data)


def outcome(v: Any) -> Outcome:
    """A terminal of a kept diagram: an :class:`~.compile.Outcome` as a list, each field typed."""
    kind, backend, judged, explicit, rule, sources = _typed(v, list, "terminal")
    if kind not in ("chosen", "none", "refused", "contradiction", "absent"):
        raise ValueError("terminal: unknown kind")
    for x in (backend, explicit, rule):
        if x is not None:
            _typed(x, str, "terminal field")
    names = [_typed(b, str, "backend") for b in (*_typed(judged, list, "judged"), *_typed(sources, list, "sources"))]
    del names
    return Outcome(kind, backend, tuple(judged), explicit, rule, tuple(sources))


def _summary(s: Mapping[str, Any]) -> dict[str, Any]:
    """A walk's summary, each field checked (see :func:`kernelpolicy.analysis.checking.summary`)."""
    out: dict[str, Any] = {}
    for name, kind in (("cells", int), ("resolves", int), ("pruned", int)):
        out[name] = _typed(s[name], kind, name)
    seconds = s["seconds"]
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        raise TypeError("seconds: expected a number")
    out["seconds"] = float(seconds)
    for name in ("nodes", "outcomes"):
        per = _typed(s[name], dict, name)
        out[name] = {_typed(k, str, "path"): _typed(v, int, name) for k, v in per.items()}
    out["dimensions"] = [_typed(d, str, "dimension") for d in _typed(s["dimensions"], list, "dimensions")]
    return out
