"""``kernelpolicy lsp``: the language server for rule, policy and case files, over stdio."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "lsp",
        help="run the language server for rule, policy and case files (stdio)",
        description="Speak the Language Server Protocol on standard input and output: diagnostics "
        "from the same code as `check` as the file is typed, hover on rule ids (with where they fire), "
        "fact keys, backend ids, catalog models and GPUs, completion of fact keys, values, release "
        "versions, backend ids and overridable rule ids, go to definition and references of rule ids, "
        "the rules of a file as its symbols, formatting as `fmt`, code actions (`fmt`, an `until` where "
        "a cited fix shipped, a narrower `when` from the proof), and code lenses (a case's `explain`, "
        "an operator file's `diff` against disk). The policy files it layers: `KERNELPOLICY_POLICY` and "
        "the `policy` list of the client's settings (docs/editors.md). Needs the `lsp` extra. Exit "
        "status: 0 when the client said `exit` after `shutdown`, 1 on `exit` without it, 2 without the extra.",
    )
    p.add_argument("--stdio", action="store_true", help="use standard input and output (the default, and the only way)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ModuleNotFoundError as exc:
        from .._install import install_command

        # from where this copy was installed: kernelpolicy is not on the package index
        command, _, _comment = install_command("lsp").partition("  # ")
        raise UsageError(f"`kernelpolicy lsp` needs `{exc.name}`: install the `lsp` extra (`{command}`)") from None
    from ..lsp.server import serve

    return serve()
