"""The contracts the code cites live in this repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_CITED = re.compile(r"\b(docs/[\w./-]+\.md)\b")


def _texts() -> list[tuple[Path, str]]:
    out = []
    for folder in ("src", "tests", "benchmarks", "scripts"):
        for p in (ROOT / folder).rglob("*"):
            if p.is_file() and p.suffix in (".py", ".sh", ".md") and "__pycache__" not in p.parts:
                out.append((p, p.read_text(encoding="utf-8", errors="replace")))
    return out


def test_no_citation_of_a_file_outside_the_repository() -> None:
    me = Path(__file__).resolve()
    bad = [str(p.relative_to(ROOT)) for p, text in _texts() if "DESIGN.md" in text and p.resolve() != me]
    assert bad == [], "cite docs/design.md"


def test_cited_docs_exist() -> None:
    cited = {m for _, text in _texts() for m in _CITED.findall(text)}
    assert "docs/design.md" in cited
    assert sorted(c for c in cited if not (ROOT / c).is_file()) == []
