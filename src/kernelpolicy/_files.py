"""Bounded reads: only regular files, checked before they are opened, read up to a limit.

Everything kernelpolicy reads from a path a user or another process controls (rule files,
policy files, case files, cache entries) goes through :func:`read_bounded`, so ``/dev/zero``,
a FIFO, a socket, a folder or a symbolic-link loop is refused at once instead of read forever
or waited on.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["ReadError", "is_regular", "read_bounded"]


class ReadError(Exception):
    """Why a file was not read, in words (``no such file or directory``, ``a FIFO, ...``)."""

    def __init__(self, reason: str, *, too_large: bool = False, errno: int | None = None) -> None:
        self.reason = reason
        self.too_large = too_large
        self.errno = errno  #: the OS error number, where an OS call failed
        super().__init__(reason)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _why(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file *path*, at most *limit* of them.

    :raises ReadError: for a missing or unreadable path, anything but a regular file (links are
        followed; a loop is an error), or a file larger than *limit* bytes.
    """
    try:
        st = os.stat(path)  # follows links; a link loop is ELOOP here
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        if isinstance(exc, OSError):
            raise ReadError(_why(exc), errno=exc.errno) from None
        raise ReadError("not a valid file name") from None
    if not stat.S_ISREG(st.st_mode):
        raise ReadError(f"{_kind(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise ReadError(f"larger than {limit} bytes", too_large=True)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO swapped in after the stat does not block
    except OSError as exc:
        raise ReadError(_why(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ReadError("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ReadError(_why(exc)) from None
    finally:
        os.close(fd)
    if size > limit:
        raise ReadError(f"larger than {limit} bytes", too_large=True)
    return b"".join(chunks)


def is_regular(path: Path) -> bool:
    """Whether *path* leads to a regular file (never raises)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
