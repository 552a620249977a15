"""Bounded reads: only regular files, checked before they are opened, read up to a limit.

Everything kernelpolicy reads from a path a user or another process controls (rule files,
policy files, case files, cache entries) goes through :func:`read_bounded`, so ``/dev/zero``,
a FIFO, a socket, a folder or a symbolic-link loop is refused at once instead of read forever
or waited on.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Final

__all__ = [
    "SURROGATE_ESCAPES",
    "ReadError",
    "folder_refusal",
    "is_regular",
    "json_guarded",
    "output_path",
    "owned_folder",
    "owned_folders",
    "read_bounded",
    "read_owned",
    "shown_name",
    "write_private",
    "write_text_at_once",
]


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


#: A file name's bytes that are not UTF-8 (Python holds them as the surrogates U+DC80-U+DCFF,
#: which no encoding writes) as ``\xNN``.
SURROGATE_ESCAPES: Final = {0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)}


def shown_name(name: str) -> str:
    """*name* as text that every encoding can carry and print: a byte of a file name that is
    not UTF-8 (the byte 0xff of ``pol?.yaml``) written ``\\xff``, as ``ls -b`` shows it."""
    return name.translate(SURROGATE_ESCAPES)


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
        return _read_fd(fd, limit)
    except OSError as exc:
        raise ReadError(_why(exc)) from None
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int) -> bytes:
    """Everything *fd* holds, reading at most one byte past *limit* to tell that it is larger.

    :raises ReadError: it holds more than *limit* bytes.
    """
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise ReadError(f"larger than {limit} bytes", too_large=True)
    return b"".join(chunks)


class _NotFinite(ValueError):
    pass


def _no_constant(name: str) -> float:
    raise _NotFinite(f"`{name}` is not a number JSON has")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 reads as infinity
        raise _NotFinite(f"`{text[:20]}` is too large a number")
    return value


def json_guarded(raw: bytes) -> Any:
    """The JSON document *raw* (UTF-8), with the guards every JSON input of kernelpolicy has:
    no ``NaN`` or ``Infinity`` (nor a float so large it reads as one), no integer of more digits
    than Python converts, no nesting deeper than Python's parser recurses.

    :raises ReadError: saying what is wrong (``not JSON: ... at line L column C``, ...).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReadError("not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise ReadError(f"not JSON: {exc.msg.lower()} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ReadError("not JSON kernelpolicy reads: nested too deeply") from None
    except _NotFinite as exc:
        raise ReadError(f"not JSON kernelpolicy reads: {exc}") from None
    except ValueError:  # an integer of more digits than Python converts
        raise ReadError("not JSON kernelpolicy reads: a number too large") from None


def is_regular(path: Path) -> bool:
    """Whether *path* leads to a regular file (never raises)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _owned(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else (where the platform has owners)."""
    uid = getattr(os, "geteuid", None)
    return uid is None or (st.st_uid == uid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _open_owned_folder(folder: str | os.PathLike[str], dir_fd: int | None = None) -> int:
    """*folder* (relative to *dir_fd* where given) opened without following a link, when it is
    a folder :func:`_owned` holds for."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(folder, flags, dir_fd=dir_fd)
    except (OSError, ValueError) as exc:
        errno = exc.errno if isinstance(exc, OSError) else None
        raise ReadError(_why(exc) if isinstance(exc, OSError) else "not a valid folder name", errno=errno) from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise ReadError(_why(exc)) from None
    if not stat.S_ISDIR(st.st_mode) or not _owned(st):
        os.close(fd)
        raise ReadError("the folder is not this user's alone (another owner, or others may write it)")
    return fd


def owned_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether *folder* is a folder (not a link) this user owns and no one else may write: only
    such a folder is trusted with a cache another user could otherwise plant or edit."""
    try:
        os.close(_open_owned_folder(folder))
    except ReadError:
        return False
    return True


def folder_refusal(folder: str | os.PathLike[str]) -> str | None:
    """Why an existing *folder* is not trusted with a cache (:func:`owned_folder`), in words;
    ``None`` when it is, or when it does not exist yet (it is created for this user alone)."""
    try:
        os.close(_open_owned_folder(folder))
    except ReadError as exc:
        return None if exc.errno == errno.ENOENT else exc.reason
    return None


def owned_folders(folder: str | os.PathLike[str], *names: str) -> bool:
    """Whether *folder* and each folder below it that *names* lead to (``folder/a``,
    ``folder/a/b``, ...) passes :func:`owned_folder`: each opened without following a link, from
    the one above it, so no link anywhere on the way is followed."""
    try:
        fd = _open_owned_folder(folder)
    except ReadError:
        return False
    try:
        for name in names:
            if not name or "/" in name or name in (".", ".."):
                return False
            try:
                inner = _open_owned_folder(name, fd)
            except ReadError:
                return False
            os.close(fd)
            fd = inner
        return True
    finally:
        os.close(fd)


def read_owned(folder: str | os.PathLike[str], name: str, limit: int) -> bytes:
    """The bytes of the file *name* in *folder*, read as :func:`read_bounded` reads, when the
    folder passes :func:`owned_folder` and the file is a regular file (not a link) with the
    same owner and mode: a cache shared on a machine is believed only when it is this user's.

    :raises ReadError: otherwise, saying why.
    """
    dir_fd = _open_owned_folder(folder)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except OSError as exc:
            raise ReadError(_why(exc), errno=exc.errno) from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(f"{_kind(st.st_mode)}, not a regular file")
        if not _owned(st):
            raise ReadError("the file is not this user's alone (another owner, or others may write it)")
        if st.st_size > limit:
            raise ReadError(f"larger than {limit} bytes", too_large=True)
        return _read_fd(fd, limit)
    except OSError as exc:
        raise ReadError(_why(exc)) from None
    finally:
        os.close(fd)


def output_path(name: str) -> Path:
    """The file *name* an option writes, checked before any work is done: a name, in a folder
    that is there, and not a FIFO, device or folder (:func:`write_text_at_once` checks again
    when it writes).

    :raises ReadError: saying what is wrong with it.
    """
    if not name.strip():
        raise ReadError("an empty file name")
    path = Path(name)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise ReadError(f"no such folder `{path.parent}`") from None
        return path
    except (OSError, ValueError) as exc:
        raise ReadError(_why(exc) if isinstance(exc, OSError) else "not a valid file name") from None
    if not stat.S_ISREG(st.st_mode):
        raise ReadError(f"{_kind(st.st_mode)}, not a regular file")
    return path


def write_text_at_once(path: Path, text: str) -> None:
    """Write *text* to *path* through a temporary file renamed over it: a reader never sees half
    of it, and a FIFO, device or folder at *path* is refused (opening a FIFO to write waits for a
    reader forever) instead of written to.

    :raises ReadError: *path* is not a regular file (saying what it is).
    :raises OSError: the folder cannot be written.
    """

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ReadError(f"{_kind(st.st_mode)}, not a regular file")
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, (st.st_mode & 0o7777) if st is not None else 0o644)
        os.replace(tmp, target)
    except BaseException:  # a full disk, a file-size limit, Ctrl-C: no half file, the old one kept
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_private(folder: Path, name: str, blob: bytes) -> bool:
    """Store *blob* as *folder*/*name* through a temporary file renamed over it (a reader never
    sees half an entry; a FIFO or bad file planted there is replaced), creating *folder* for this
    user alone. A cache entry is written only where :func:`owned_folder` holds, so that no other
    user can plant or edit what a later run believes.

    :returns: whether it was written (``False``: the folder is not this user's alone, or cannot
        be written; the caller computes again next time).
    """
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not owned_folder(folder):
            return False
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, folder / name)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return False
    return True
