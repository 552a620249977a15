"""What each published release of a kernel package contains, as the rules' ``fix`` entries ask.

A rule that cites its fix (``fixed in FlashInfer 0.6.16``) may name how the fix shows in released
code (its ``fix``: a package, a file inside it and a signature). :mod:`._scan` downloads every
release of each named package the index lists (post releases included; ``pip download
--no-deps``, cached under the kernelpolicy cache folder), looks for each signature, and writes
``contents.json`` beside this module: per signature, the releases whose code has it, lacks it, or
lacks the file. ``kernelpolicy knowledge stale`` reads that table (no network), so a window the
released code contradicts (a fix reverted on a release branch) is a finding in CI.

Regenerate with ``python -m kernelpolicy.releases.packages._scan`` (``--offline``: only the
cached files). Data and pure functions only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from packaging.version import Version

from ...policy import FixEvidence

__all__ = ["CONTENTS_FILE", "ReleaseContents", "contents_of", "contents_of_any", "scanned_contents"]

#: Written by :mod:`._scan`, never edited.
CONTENTS_FILE: Final = Path(__file__).with_name("contents.json")


@dataclass(frozen=True)
class ReleaseContents:
    """Which scanned releases of a package have one fix signature."""

    evidence: FixEvidence
    has: tuple[str, ...]  #: the file is there and shows the signature
    lacks: tuple[str, ...]  #: the file is there without it
    no_file: tuple[str, ...]  #: the file is not in that release

    @property
    def releases(self) -> tuple[str, ...]:
        """Every scanned release, oldest first."""
        return tuple(sorted((*self.has, *self.lacks, *self.no_file), key=Version))

    def shows(self, release: str) -> bool | None:
        """Whether *release* has the fix (``None``: not scanned)."""
        if release in self.has:
            return True
        if release in self.lacks or release in self.no_file:
            return False
        try:
            want = Version(release)
        except ValueError:  # InvalidVersion, or more digits than int() converts
            return None
        for group, answer in ((self.has, True), (self.lacks, False), (self.no_file, False)):
            if any(Version(r) == want for r in group):
                return answer
        return None


@functools.cache
def scanned_contents(path: Path = CONTENTS_FILE) -> Mapping[str, ReleaseContents]:
    """The checked-in table: evidence key (:attr:`FixEvidence.key`) -> what each release holds."""
    if not path.is_file():
        return {}
    doc = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, ReleaseContents] = {}
    for entry in doc.get("fixes", []):
        ev = FixEvidence(entry["package"], entry["file"], entry["kind"], entry["pattern"])
        out[ev.key] = ReleaseContents(
            ev, tuple(entry.get("has", [])), tuple(entry.get("lacks", [])), tuple(entry.get("no_file", []))
        )
    return out


def contents_of(evidence: FixEvidence) -> ReleaseContents | None:
    """What the scanned releases hold of *evidence*, or ``None`` when the table lacks it."""
    return scanned_contents().get(evidence.key)


def contents_of_any(alternatives: Sequence[FixEvidence]) -> ReleaseContents | None:
    """What the scanned releases hold of a fix that shows as any of *alternatives* (one package):
    a release has it where one alternative shows, lacks the file where every alternative does, and
    lacks it otherwise. ``None`` when the table lacks one of them (it must be scanned first)."""
    seen = [contents_of(ev) for ev in alternatives]
    if not seen or any(c is None for c in seen):
        return None
    found = [c for c in seen if c is not None]
    if len(found) == 1:
        return found[0]
    releases = sorted({r for c in found for r in c.releases}, key=Version)
    has = tuple(r for r in releases if any(r in c.has for c in found))
    no_file = tuple(r for r in releases if r not in has and all(r in c.no_file for c in found))
    lacks = tuple(r for r in releases if r not in has and r not in no_file)
    return ReleaseContents(found[0].evidence, has, lacks, no_file)
