"""The ``kernelpolicy`` command: one module per subcommand, this one dispatches.

Every subcommand module exposes ``add_parser(subparsers)`` and ``run(args) -> int``. Bad input
ends in one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from .._files import SURROGATE_ESCAPES
from .._version import __version__
from ..errors import KernelPolicyError
from ._argv import parse as parse_argv

__all__ = ["main", "one_line"]

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS = (
    "_explain", "_facts", "_check", "_test", "_diff", "_vllm", "_sglang", "_schema", "_fmt", "_matrix",
    "_knowledge",
    "_completion", "_fleet", "_bench", "_lsp",
)  # fmt: skip


#: Control characters (a user value may hold any) as escapes, so an error stays one line.
#: Bytes of a file name that are not UTF-8 as ``\xNN``: no encoding writes them as they are.
_ESCAPES = {c: repr(chr(c))[1:-1] for c in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029)} | SURROGATE_ESCAPES


#: The longest quoted value a message shows whole (a 5,000-digit version was a 5 kB line); a
#: longer one keeps its first :data:`_QUOTED_HEAD` characters and says how long it was.
_QUOTED_SHOWN = 200
_QUOTED_HEAD = 60
_LONG_QUOTED = re.compile("`([^`]{" + str(_QUOTED_SHOWN + 1) + ",})`")


def _cut(match: re.Match[str]) -> str:
    value = match.group(1)
    return f"`{value[:_QUOTED_HEAD]}...` ({len(value):,} characters)"


def one_line(text: str) -> str:
    """*text* with its control characters escaped (``\\r``, ``\\n``, ...): one line, whatever it
    quotes; a quoted value longer than :data:`_QUOTED_SHOWN` characters is cut."""
    return _LONG_QUOTED.sub(_cut, text.translate(_ESCAPES))


#: What stdout never carries raw: control characters but newline and tab (a rule id, a case name
#: or a facts file's GPU name with ESC must not drive the terminal), DEL and the C1 controls.
#: A file name's bytes that are not UTF-8 as ``\xNN`` too.
_STDOUT_ESCAPES = {
    c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)
} | SURROGATE_ESCAPES


class _EscapedOutput:
    """A stand-in for ``sys.stdout`` that escapes :data:`_STDOUT_ESCAPES` in every write (JSON
    output escapes them itself; kernelpolicy prints no colours on stdout)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(text.translate(_STDOUT_ESCAPES))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _encodable(stream: Any) -> None:
    """A character the user's encoding lacks (``PYTHONIOENCODING=ascii``, a latin-1 terminal)
    written as a ``\\xe8``-style escape instead of failing the command (JSON output is ASCII
    already)."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
        with contextlib.suppress(ValueError, OSError):  # closed, or not changeable
            reconfigure(errors="backslashreplace")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr (argparse prints the whole usage first); every
    subcommand's parser is of this class too (``add_subparsers`` uses the parent's class)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(one_line(f"{self.prog}: error: {message} (see `{self.prog} --help`)") + "\n")
        raise SystemExit(2)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """As argparse's, but words the subcommand does not take are an error of that subcommand,
        pointing at its help (``kernelpolicy fleet --help``), not the top level's."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            prog = f"{self.prog} {command}" if command else self.prog
            message = f"unrecognized arguments: {' '.join(extras)}"
            sys.stderr.write(one_line(f"{prog}: error: {message} (see `{prog} --help`)") + "\n")
            raise SystemExit(2)
        return parsed


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with *only* (a subcommand's name), the top level with that one
    subcommand alone: a run reads one subcommand, and building all of them cost a third of
    ``explain``'s start-up (their modules, and every option of every one)."""
    parser = _Parser(
        prog="kernelpolicy",
        description="Decide, check and explain the kernel backend of every code path.",
    )
    parser.add_argument("--version", action="version", version=f"kernelpolicy {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS if only is None or f"_{only}" not in SUBCOMMANDS else (f"_{only}",):
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue  # not part of this build
            raise
        module.add_parser(sub)
    return parser


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _closed_stdout() -> bool:
    """Whether there is no standard output to write to (``kernelpolicy ... >&-``)."""
    return sys.stdout is None


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at the null device, so the exit flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _one_line_warnings() -> None:
    """kernelpolicy's own warnings (a deprecated variable) as one ``kernelpolicy: warning:``
    line on stderr, not Python's two-line ``file:line: FutureWarning`` form."""
    import warnings

    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if f"{os.sep}kernelpolicy{os.sep}" in filename and issubclass(category, FutureWarning | UserWarning):
            print(one_line(f"kernelpolicy: warning: {message}"), file=sys.stderr)
            return
        shown(message, category, filename, lineno, file, line)

    if getattr(shown, "__name__", "") != "show":
        warnings.showwarning = show


def _unexpected(exc: Exception) -> int:
    """The exit status for an exception no subcommand expected: a warning that ``-W error`` or
    ``PYTHONWARNINGS=error`` raised is the user's choice (exit 2 with its text, a deprecated
    variable's, say); anything else is a bug, one line unless ``KERNELPOLICY_DEBUG`` asks for
    the traceback."""
    if isinstance(exc, Warning):
        why = f"kernelpolicy: error: {exc} (a warning, raised as an error by -W/PYTHONWARNINGS)"
        print(one_line(why), file=sys.stderr)
        return 2
    if os.environ.get("KERNELPOLICY_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):  # (not `0`)
        raise exc
    print(
        one_line(
            f"kernelpolicy: internal error: {exc.__class__.__name__}: {exc} "
            "(set KERNELPOLICY_DEBUG=1 for a traceback, and please report it)"
        ),
        file=sys.stderr,
    )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, 1 findings, 2 bad input, 3 no backend).

    Whatever goes wrong ends in one line on stderr, never a traceback (unless
    ``KERNELPOLICY_DEBUG=1`` asks for one).
    """
    if _closed_stdout():
        print("kernelpolicy: error: standard output is closed: nowhere to write the result", file=sys.stderr)
        return 2
    _encodable(sys.stdout)
    _encodable(sys.stderr)
    _one_line_warnings()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(argv[0] if argv and not argv[0].startswith("-") else None)
    try:
        args = parse_argv(parser, argv)  # 20,000 `--fact`: linear, not quadratic
    except SystemExit as exc:  # argparse printed its one-line usage error (or --help)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    real_stdout = sys.stdout
    sys.stdout = _EscapedOutput(real_stdout)
    try:
        code: int = args.run(args)
        sys.stdout.flush()  # a full disk or a closed pipe is reported here, not at exit
    except KernelPolicyError as exc:
        print(one_line(f"kernelpolicy: {exc.one_line()}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as exc:  # the machine, not the input nor a bug: a full disk, a missing device
        why = (exc.strerror or str(exc)).lower()
        if exc.filename:
            print(one_line(f"kernelpolicy: error: `{exc.filename}`: {why}"), file=sys.stderr)
        else:
            print(f"kernelpolicy: error: cannot write the output: {why}", file=sys.stderr)
            _silence_stdout()
        return 2
    except Exception as exc:  # a bug (or a warning made an error): one line, unless asked for the traceback
        return _unexpected(exc)
    finally:
        if isinstance(sys.stdout, _EscapedOutput):
            sys.stdout = real_stdout
    return code


def entry() -> None:
    sys.exit(main())
