"""``kernelpolicy vllm venv X.Y.Z`` and ``kernelpolicy sglang venv X.Y.Z``: build (or find) the
cached venv of one engine release, the one ``kernelpolicy vllm audit --vllm X.Y.Z`` (or
``kernelpolicy sglang audit --sglang X.Y.Z``) runs in; prints its python path (the only stdout
line)."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(vsub: Any, engine: str = "vllm", label: str = "vLLM") -> None:
    """Add ``venv`` to the *engine* command's subparsers (*label*: how its help writes the engine;
    ``kernelpolicy._venvs`` is not imported here, to keep it off the CLI's start-up)."""
    p: argparse.ArgumentParser = vsub.add_parser(
        "venv",
        help=f"build (once) the cached venv of one {label} release; print its python",
        description=f"Create, or reuse, a virtual environment with {engine}==X.Y.Z from the package index "
        "in kernelpolicy's cache (uv when it is on PATH or beside kernelpolicy, hard-linking every venv "
        "from one uv cache; pip otherwise), and print its python path. "
        "An interrupted build is removed and redone on the next call. Exit status: 0 built or found, "
        "2 the build failed.",
    )
    p.add_argument("version", metavar="X.Y.Z", help=f"the {label} release")
    p.add_argument("--python", metavar="BASE_PYTHON", help="the python the venv is made from")
    tool = p.add_mutually_exclusive_group()
    tool.add_argument("--uv", dest="use_uv", action="store_const", const=True, help="use uv (fail without it)")
    tool.add_argument("--pip", dest="use_uv", action="store_const", const=False, help="use venv and pip")
    p.set_defaults(run=functools.partial(run, engine=engine), use_uv=None)


def run(args: argparse.Namespace, engine: str = "vllm") -> int:
    from .._venvs import ensure_venv
    from ..progress import progress

    if args.python is not None and not args.python.strip():
        raise UsageError("--python ``: an empty path (leave --python out for the default python)")
    with progress(f"{engine} {args.version}") as bar:
        python = ensure_venv(
            args.version,
            base_python=args.python,
            use_uv=args.use_uv,
            note=lambda step: bar.note(f"{engine} {args.version}: {step}"),
            engine=engine,
        )
    sys.stdout.write(f"{python}\n")
    return 0
