"""Where a rule's fields are written: line, column and source text for a caret.

A loaded :class:`~kernelpolicy.policy.Policy` keeps only the line of each entry; findings of
the analysis point at one field of it (``when``, ``until``, ``deny``, ...). This re-reads the
files once (they are small) and maps every entry id to its fields' positions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..dsl.files import Located, SourceError, SourceFile, YamlError, load_located
from .findings import Finding

__all__ = ["Locator"]

_SECTIONS = ("rules", "order", "implies", "unsupported", "backends")


@dataclass(frozen=True)
class _Entry:
    file: str
    loc: Located
    path: tuple[str | int, ...]


class Locator:
    """Positions of the entries of *files* by id (rule, order and implication ids, and
    ``catalog.<path>.<backend>`` for catalog entries)."""

    def __init__(self, files: Iterable[SourceFile]) -> None:
        self._files = tuple(files)
        self._index: dict[str, _Entry] | None = None

    @property
    def _entries(self) -> dict[str, _Entry]:
        """The positions, read when a finding first needs one (a clean check reads none)."""
        if self._index is None:
            self._index = self._read()
        return self._index

    def _read(self) -> dict[str, _Entry]:
        entries: dict[str, _Entry] = {}
        for src in self._files:
            try:
                loc = load_located(src.read_text(), src.display)  # bounded, regular files only
            except (SourceError, YamlError):
                continue
            if not isinstance(loc.data, dict):
                continue
            for section in _SECTIONS:
                items = loc.data.get(section)
                if not isinstance(items, list):
                    continue
                for i, item in enumerate(items):
                    if not isinstance(item, dict):
                        continue
                    for owner in _ids(section, item):
                        entries.setdefault(owner, _Entry(src.display, loc, (section, i)))
        return entries

    def place(self, owner: str, fields: tuple[str, ...] = ()) -> tuple[str, int, int, int, str | None] | None:
        """``(file, line, column, width, source line)`` of the first of *fields* that *owner*
        has (the entry itself when it has none of them)."""
        e = self._entries.get(owner)
        if e is None:
            return None
        for f in fields:
            if (*e.path, f) in e.loc.key_positions:
                line, col, width = e.loc.where((*e.path, f), key=True)
                return e.file, line, col, width, e.loc.line_text(line)
        line, col, width = e.loc.where(e.path)
        return e.file, line, col, width, e.loc.line_text(line)

    def locate(self, finding: Finding, *fields: str, owner: str | None = None) -> Finding:
        """*finding* pointed at the first of *fields* of its rule (or of *owner*)."""
        who = owner or finding.rule
        where = self.place(who, fields) if who else None
        if where is None:
            return finding
        file, line, col, width, text = where
        return replace(finding, file=file, line=line, column=col, span=width, source_line=text)


def _ids(section: str, item: dict[str, object]) -> list[str]:
    if section == "backends":
        b, paths = item.get("backend"), item.get("paths")
        if isinstance(b, str) and isinstance(paths, list):
            return [f"catalog.{p}.{b}" for p in paths]
        return []
    rid = item.get("id")
    return [rid] if isinstance(rid, str) else []
