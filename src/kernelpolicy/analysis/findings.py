"""Findings of ``kernelpolicy check``: one shape for schema errors and analysis results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from ..errors import Diagnostic

__all__ = ["CODES", "Finding", "from_diagnostic"]

Level = Literal["error", "warning"]

#: Every finding code, and whether it is an error or a warning by default.
CODES: Final[dict[str, Level]] = {
    "schema": "error",
    "yaml": "error",
    "io": "error",
    "too-large": "error",
    "duplicate": "error",
    "missing-refs": "warning",
    "impossible": "warning",
    "dead": "warning",
    "shadowed": "warning",
    "contradiction": "error",
    "stale-rule": "warning",
    "unknown-release": "warning",
    "no-backend": "error",
    "denied-chosen": "error",
    "unmet-requirement": "error",
    "warmup": "error",
    "implies-conflict": "error",
    "unsupported-unused": "warning",
}


@dataclass(frozen=True)
class Finding:
    """One finding, located in a file where it has a place, or in a domain cell."""

    code: str
    message: str
    level: Level = "warning"
    file: str = ""
    line: int = 0
    column: int = 0
    rule: str | None = None
    help: str | None = None
    cell: str | None = None  #: the domain cells the finding holds in
    cells: int = 0  #: how many cells
    source_line: str | None = None
    span: int = 1
    field: str | None = None  #: the rule field the finding is about (``when``, ``until``, ...)

    def diagnostic(self) -> Diagnostic:
        """The finding as a :class:`~kernelpolicy.errors.Diagnostic` (to render it)."""
        message = self.message + (f" (in {self.cell})" if self.cell else "")
        return Diagnostic(
            message,
            file=self.file or "<domain>",
            line=self.line,
            column=self.column,
            level=self.level,
            rule=self.rule,
            help=self.help,
            code=self.code,
            source_line=self.source_line,
            span=self.span,
        )

    def render(self) -> str:
        """``file:line:col: level: message``, the source line with a caret, and the help."""
        return self.diagnostic().render()

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready data (empty fields left out)."""
        out: dict[str, Any] = {"code": self.code, "level": self.level, "message": self.message}
        for k in ("file", "line", "column", "rule", "field", "help", "cell", "cells"):
            v = getattr(self, k)
            if v:
                out[k] = v
        return out


def from_diagnostic(d: Diagnostic) -> Finding:
    """A loader diagnostic as a finding."""
    return Finding(
        d.code,
        d.message,
        d.level,
        d.file,
        d.line,
        d.column,
        d.rule,
        d.help,
        source_line=d.source_line,
        span=d.span,
    )
