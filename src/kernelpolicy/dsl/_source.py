"""Rule files to load: where each is, the name to show for it, its layer, and a bounded read.

Only regular files are read (a FIFO, a device such as ``/dev/zero`` or a socket is refused
before it is opened for reading), each at most :data:`MAX_BYTES`; folders are walked without
following symbolic links to folders (so a link loop cannot trap the walk) and within
:data:`MAX_WALK` entries (so ``--policy /`` ends at once with a clear error).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from .._files import ReadError, shown_name
from .._files import read_bounded as _read
from ..errors import Diagnostic
from ..policy import Layer

__all__ = [
    "MAX_BYTES",
    "MAX_WALK",
    "PinnedSource",
    "SourceError",
    "SourceFile",
    "decode",
    "read_bounded",
    "yaml_files_under",
]

#: The largest rule, policy or case file read (nothing this large is a rule table).
MAX_BYTES: Final = 1_000_000
#: The most folder entries a walk for YAML files looks at.
MAX_WALK: Final = 5_000


_TOO_LARGE_HELP: Final = "split rule files; nothing this large is a rule table"


class SourceError(Exception):
    """A file or folder that cannot be read as rule input; ``diagnostic`` says why."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        self.diagnostic = diagnostic
        super().__init__(diagnostic.one_line())


def read_bounded(path: Path, display: str, *, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file *path*, checked before reading and read with a bound.

    :raises SourceError: naming *display*: no such file, not a regular file, too large, ...
    """
    try:
        return _read(path, limit)
    except ReadError as exc:
        if exc.too_large:
            message, code, help = f"file is larger than {limit} bytes", "too-large", _TOO_LARGE_HELP
            diag = Diagnostic(message, file=display, code=code, help=help)
        else:
            diag = Diagnostic(f"cannot read file: {exc.reason}", file=display, code="io")
        raise SourceError(diag) from None


def decode(data: bytes, display: str) -> str:
    """*data* as UTF-8 text.

    :raises SourceError: when it is not UTF-8.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SourceError(Diagnostic("cannot read file: not UTF-8 text", file=display, code="io")) from None


def yaml_files_under(root: Path, *, recursive: bool = True, limit: int = MAX_WALK) -> list[Path]:
    """The ``*.yaml``/``*.yml`` files under the folder *root*, sorted; links to folders are not
    followed, links to files are listed (and later read only if they lead to regular files).

    :raises SourceError: when the walk would look at more than *limit* entries.
    """
    found: list[Path] = []
    seen = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue  # an unreadable sub-folder holds nothing we can read
        seen += len(entries)
        if seen > limit:
            raise SourceError(
                Diagnostic(
                    f"folder holds more than {limit} entries: not a folder of rule files",
                    file=str(root),
                    code="io",
                    help="name the policy files, or a folder that holds only them",
                )
            )
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if recursive:
                        stack.append(Path(e.path))
                elif e.name.endswith((".yaml", ".yml")) and not e.is_dir():
                    found.append(Path(e.path))
            except OSError:
                continue
    return sorted(found)


@dataclass(frozen=True)
class SourceFile:
    path: Path
    display: str  #: the name shown for it: bytes of the name that are not UTF-8 as ``\xNN``
    layer: Layer

    def __post_init__(self) -> None:
        # a name that is not UTF-8 is shown, hashed and printed as text every encoding carries
        object.__setattr__(self, "display", shown_name(self.display))

    def read_bytes(self) -> bytes:
        """The file's bytes (see :func:`read_bounded`)."""
        return read_bounded(self.path, self.display)

    def pinned(self) -> SourceFile:
        """This file with its bytes read now: every later read gives those bytes (a check proves,
        keys and reports one content, even when the file is saved meanwhile)."""
        try:
            data: bytes | SourceError = self.read_bytes()
        except SourceError as exc:
            data = exc
        return PinnedSource(self.path, self.display, self.layer, data)

    def read_text(self) -> str:
        """The file's text, bounded and checked (see :func:`read_bounded`).

        :raises SourceError: with the reason in words.
        """
        return decode(self.read_bytes(), self.display)


@dataclass(frozen=True)
class PinnedSource(SourceFile):
    """A :class:`SourceFile` read once (:meth:`SourceFile.pinned`)."""

    data: bytes | SourceError = field(default=b"", repr=False, compare=False)

    def read_bytes(self) -> bytes:
        if isinstance(self.data, SourceError):
            raise self.data
        return self.data

    def pinned(self) -> SourceFile:
        return self
