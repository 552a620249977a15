"""``kernelpolicy matrix``: the support matrix (catalog GPU x catalog model x path) of the rules."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "matrix",
        help="the support matrix: every catalog GPU x catalog model x path, with the deciding rule",
        description="Resolve every catalog model on every catalog GPU and print, per path, the chosen "
        "backend and the rule that decided it: markdown (docs/matrix.md), a self-contained HTML page "
        "with filters, or JSON. --policy FILE (and the files $KERNELPOLICY_POLICY names) add an operator "
        "policy on top of the shipped rules.",
    )
    p.add_argument("--format", choices=("md", "html", "json"), default="md", help="md (default), html or json")
    p.add_argument("--out", metavar="FILE", type=Path, help="write to FILE instead of stdout")
    p.add_argument("--policy", action="append", default=[], metavar="FILE", help="an operator policy file")
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ID_OR_PATH",
        help="a model to decide instead of the catalog's (an id or a folder, as `explain --model`; repeatable)",
    )
    p.add_argument(
        "--engine",
        metavar="ENGINE==X.Y.Z",
        help="the engine release to decide for (`vllm==0.34.0`, `sglang==0.5.23`): its facts and what it pins",
    )
    p.set_defaults(run=run)


def _engine(value: str | None) -> str | None:
    """*value* normalised (``vllm==0.34.0``) once it names a scanned release, else a usage error."""
    if value is None:
        return None
    from ..releases import parse_engine

    name, version = parse_engine(value)
    return f"{name}=={version}"


def run(args: argparse.Namespace) -> int:
    from ..dsl.loader import load_policy
    from ..tools.matrix import build, to_html, to_markdown

    engine = _engine(args.engine)
    from ._common import policy_files

    cells = build(load_policy(policy_files(args.policy), environ=False), engine, args.model)
    if args.format == "md":
        text = to_markdown(cells, engine)
    elif args.format == "html":
        text = to_html(cells, engine)
    else:
        doc = {"schema": "kernelpolicy.matrix/1", "engine": engine, "cells": [asdict(c) for c in cells]}
        text = json.dumps(doc, indent=1) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    if not args.out.parent.is_dir():
        raise UsageError(f"--out `{args.out}`: no such folder `{args.out.parent}`")
    from .._files import ReadError, write_text_at_once

    try:
        write_text_at_once(args.out, text)  # a FIFO is refused, not waited on
    except ReadError as exc:
        raise UsageError(f"--out `{args.out}`: {exc.reason}") from None
    return 0
