"""A rule file to load: where it is, the name to show for it, and its layer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..policy import Layer

__all__ = ["SourceFile"]


@dataclass(frozen=True)
class SourceFile:
    path: Path
    display: str
    layer: Layer
