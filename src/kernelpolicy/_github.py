"""GitHub Actions workflow commands for ``kernelpolicy check --format github``: one
``::error``/``::warning`` line per finding, which GitHub shows as an annotation on the line."""

from __future__ import annotations

from collections.abc import Iterable

from .analysis.findings import Finding

__all__ = ["annotation", "workflow_commands"]


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding) -> str:
    """One workflow command for *f* (a finding without a file annotates the run)."""
    props: list[str] = []
    if f.file:
        props.append(f"file={_prop(f.file)}")
        if f.line:
            props.append(f"line={f.line}")
            if f.column:
                props += [f"col={f.column}", f"endColumn={f.column + max(f.span, 1)}"]
    title = f"kernelpolicy {f.code}" + (f" ({f.rule})" if f.rule else "")
    props.append(f"title={_prop(title)}")
    message = f.message + (f" (in {f.cell})" if f.cell else "") + (f"\nhelp: {f.help}" if f.help else "")
    return f"::{f.level} {','.join(props)}::{_data(message)}"


def workflow_commands(findings: Iterable[Finding]) -> list[str]:
    """:func:`annotation` of each finding, in order."""
    return [annotation(f) for f in findings]
