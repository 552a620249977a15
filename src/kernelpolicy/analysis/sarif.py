"""SARIF 2.1.0 output of ``kernelpolicy check``, for code-scanning views in editors and CI.

Every result has a location (a finding without a place of its own, such as a domain cell,
points at the first checked file), a relative URI under ``%SRCROOT%`` where the file is under
the root, and a ``partialFingerprints`` entry that stays the same when lines move, so code
scanning tracks a finding across commits. Each finding code is a rule with a description.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from .._version import __version__
from .findings import CODES, Finding

__all__ = ["DESCRIPTIONS", "to_sarif"]

#: What each finding code means (one line), in the order of :data:`CODES`.
DESCRIPTIONS: Final[dict[str, str]] = {
    "schema": "A rule file does not follow the rule-file schema (unknown field, backend or fact key, bad value).",
    "yaml": "A rule file is not valid YAML, or uses a YAML feature kernelpolicy refuses (tags, anchors).",
    "io": "A rule file cannot be read (no such file, not UTF-8 text).",
    "too-large": "A rule file is over the size limit.",
    "duplicate": "An id or a catalog entry is declared twice.",
    "missing-refs": "A rule that denies a backend cites no upstream issue in `refs`.",
    "impossible": "A rule's condition can never hold, so the rule never acts.",
    "dead": "A rule never changes any decision in the whole domain.",
    "shadowed": "A rule only ever acts where another rule already decided the same thing.",
    "contradiction": "Two rules of one layer ask for different things in the same cells.",
    "stale-rule": "A rule's `until` already holds for every release the tables know.",
    "unknown-release": "A version bound names a release the scanned release data does not know.",
    "no-backend": "Some domain cells leave a path with no valid backend.",
    "denied-chosen": "A backend that a rule denies is chosen in some domain cells.",
    "unmet-requirement": "A backend is chosen where its requirements do not hold.",
    "warmup": "The warmup does not warm exactly the JIT kernels the paths run.",
    "implies-conflict": "Two implications set one fact differently for the same facts (file order would decide).",
    "unsupported-unused": "An `unsupported` entry covers no cell where its path lacks a backend.",
}
_SRCROOT: Final = "%SRCROOT%"


def _uri(file: str, root: Path) -> tuple[str, str | None]:
    """A relative URI (and its base id) where *file* is under *root*, else an absolute one."""
    p = Path(file)
    if not p.is_absolute():
        return p.as_posix(), _SRCROOT
    try:
        return p.resolve().relative_to(root.resolve()).as_posix(), _SRCROOT
    except ValueError:
        return p.resolve().as_uri(), None


def _fingerprint(f: Finding, uri: str) -> str:
    """Stable across line moves and cell counts: the code, the rule, the file and the message
    with its numbers taken out."""
    message = "".join(ch for ch in f.message if not ch.isdigit())
    blob = "\x1f".join((f.code, f.rule or "", uri, message))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def to_sarif(findings: Sequence[Finding], files: Sequence[str] = (), root: Path | None = None) -> dict[str, Any]:
    """One SARIF run with a result per finding, each with a location: its own, else the first
    of *files* (the checked files, as displayed); URIs are relative to *root* (default: the
    current folder) where they can be."""
    root = Path.cwd() if root is None else root
    codes = list(CODES)
    rules = [
        {
            "id": code,
            "name": "".join(part.capitalize() for part in code.split("-")),
            "shortDescription": {"text": DESCRIPTIONS[code]},
            "fullDescription": {"text": DESCRIPTIONS[code]},
            "defaultConfiguration": {"level": level},
            "help": {"text": "see docs/verification.md, `" + code + "`"},
        }
        for code, level in CODES.items()
    ]
    fallback = files[0] if files else "."
    results = []
    for f in findings:
        uri, base = _uri(f.file or fallback, root)
        region: dict[str, Any] = {"startLine": max(f.line, 1), "startColumn": max(f.column, 1)}
        if f.line and f.column:
            region["endColumn"] = f.column + max(f.span, 1)
        if f.source_line is not None:
            region["snippet"] = {"text": f.source_line}
        artifact: dict[str, Any] = {"uri": uri}
        if base:
            artifact["uriBaseId"] = base
        res: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": codes.index(f.code) if f.code in CODES else -1,
            "level": f.level,
            "message": {"text": f.message + (f" (in {f.cell})" if f.cell else "")},
            "locations": [{"physicalLocation": {"artifactLocation": artifact, "region": region}}],
            "partialFingerprints": {"kernelpolicyFinding/v1": _fingerprint(f, uri)},
        }
        if res["ruleIndex"] < 0:
            del res["ruleIndex"]
        props = {k: v for k, v in (("rule", f.rule), ("cells", f.cells), ("help", f.help)) if v}
        if props:
            res["properties"] = props
        results.append(res)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "kernelpolicy",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {_SRCROOT: {"uri": root.resolve().as_uri() + "/"}},
                "results": results,
            }
        ],
    }
