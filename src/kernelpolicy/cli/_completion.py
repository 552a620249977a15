"""``kernelpolicy completion SHELL``: print the completion script for bash, zsh or fish."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import UsageError
from ..tools.completion import KINDS as _KINDS
from ..tools.completion import SHELLS as _SHELLS

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "completion",
        help="print the shell completion script (bash, zsh, fish)",
        description="Print a completion script that completes subcommands, options, GPU names, model ids "
        "(catalog and local Hugging Face cache), backend ids, fact keys and rule ids. Install: "
        "bash: `kernelpolicy completion bash > ~/.local/share/bash-completion/completions/kernelpolicy`; "
        "zsh: `source <(kernelpolicy completion zsh)` in ~/.zshrc; "
        "fish: `kernelpolicy completion fish > ~/.config/fish/completions/kernelpolicy.fish`.",
    )
    p.add_argument("shell", nargs="?", choices=_SHELLS, metavar="SHELL", help=", ".join(_SHELLS))
    p.add_argument("--list", choices=_KINDS, metavar="KIND", help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.completion import script, values

    if args.list:
        sys.stdout.write("".join(f"{v}\n" for v in values(args.list)))
        return 0
    if not args.shell:
        raise UsageError(f"say which shell: one of {', '.join(_SHELLS)}")
    from . import _parser

    sys.stdout.write(script(args.shell, _parser()))
    return 0
