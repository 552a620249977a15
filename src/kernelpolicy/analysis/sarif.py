"""SARIF 2.1.0 output of ``kernelpolicy check``, for code-scanning views in editors and CI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._version import __version__
from .findings import CODES, Finding

__all__ = ["to_sarif"]


def to_sarif(findings: Sequence[Finding]) -> dict[str, Any]:
    """One SARIF run with a result per finding; file findings carry a physical location."""
    rules = [{"id": code, "defaultConfiguration": {"level": level}} for code, level in CODES.items()]
    results = []
    for f in findings:
        res: dict[str, Any] = {
            "ruleId": f.code,
            "level": f.level,
            "message": {"text": f.message + (f" (in {f.cell})" if f.cell else "")},
        }
        if f.file:
            region: dict[str, Any] = {"startLine": max(f.line, 1), "startColumn": max(f.column, 1)}
            if f.line and f.column:
                region["endColumn"] = f.column + max(f.span, 1)
            if f.source_line is not None:
                region["snippet"] = {"text": f.source_line}
            res["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": f.file}, "region": region}}]
        props = {k: v for k, v in (("rule", f.rule), ("cells", f.cells), ("help", f.help)) if v}
        if props:
            res["properties"] = props
        results.append(res)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "kernelpolicy", "version": __version__, "rules": rules}},
            "results": results,
        }],
    }
