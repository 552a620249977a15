"""The ``kernelpolicy`` command: one module per subcommand, this one dispatches.

Every subcommand module exposes ``add_parser(subparsers)`` and ``run(args) -> int``. Bad input
ends in one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from ..errors import KernelPolicyError

__all__ = ["main"]

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS = (
    "_explain", "_facts", "_check", "_test", "_diff", "_vllm", "_schema", "_fmt", "_matrix", "_completion", "_fleet",
)  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelpolicy",
        description="Decide, check and explain the kernel backend of every code path.",
    )
    parser.add_argument("--version", action="version", version=f"kernelpolicy {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    try:
        code: int = args.run(args)
    except KernelPolicyError as exc:
        print(f"kernelpolicy: {exc.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: one line, unless asked for the traceback
        if os.environ.get("KERNELPOLICY_DEBUG"):
            raise
        print(
            f"kernelpolicy: internal error: {exc.__class__.__name__}: {exc} "
            "(set KERNELPOLICY_DEBUG=1 for a traceback, and please report it)",
            file=sys.stderr,
        )
        return 1
    return code


def entry() -> None:
    sys.exit(main())
