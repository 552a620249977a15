"""``kernelpolicy fmt``: put rule and policy files in the canonical layout (comments kept)."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import sys
from pathlib import Path
from typing import Any

from ..errors import PolicyError, UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "fmt",
        help="format rule and policy files (key order, flow style for short conditions, comments kept)",
        description="Rewrite FILES (or the YAML files under folders) in the canonical layout; with --check, "
        "change nothing and exit 1 when a file is not formatted. Exit status: 0 formatted, 1 (--check) "
        "some file would change, 2 bad input.",
    )
    p.add_argument("files", nargs="+", metavar="FILES", help="rule or policy files or folders")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file would change")
    p.add_argument("--diff", action="store_true", help="with --check, print what would change")
    p.add_argument(
        "--schema",
        metavar="URI",
        help="the `$schema` the header line names (`none`: no header line; default: the line kept, else"
        " the `schemas/` folder above the file, as a relative path; never an absolute path of this machine)",
    )
    p.set_defaults(run=run)


def _targets(items: list[str]) -> list[Path]:
    """The files to format: those named, and the YAML files under the folders named, where a
    link found in a folder is skipped (``fmt DIR`` never writes outside DIR through one)."""
    from ..dsl.files import SourceError, yaml_files_under

    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            try:
                found = yaml_files_under(p)
            except SourceError as exc:
                raise PolicyError([exc.diagnostic]) from None
            for f in found:
                if f.is_symlink():
                    print(
                        f"kernelpolicy: warning: `{f}` is a link: skipped (name it to format its target)",
                        file=sys.stderr,
                    )
                else:
                    out.append(f)
        elif p.exists():
            out.append(p)
        else:
            raise UsageError(f"no such file or folder `{item}`")
    return out


def _write(path: Path, text: str) -> None:
    """Replace *path*'s content at once (a temporary file beside it, renamed over it), keeping
    its mode; a link named on the command line is written through to its target."""
    import os
    import tempfile

    target = path.resolve()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def run(args: argparse.Namespace) -> int:
    from ..dsl.files import SourceError, decode, read_bounded
    from ..tools.fmt import NO_SCHEMA, SCHEMA_HEADER, find_schema, format_text

    changed = 0
    unnamed: list[Path] = []  # files left without a schema line: no schemas/ folder above them
    for path in _targets(args.files):
        try:  # the loader's bounded reader: regular files only, at most 1 MB, UTF-8
            text = decode(read_bounded(path, str(path)), str(path))
        except SourceError as exc:
            raise PolicyError([exc.diagnostic]) from None
        new = format_text(text, file=path, schema=args.schema)
        if args.schema != NO_SCHEMA and not new.startswith(SCHEMA_HEADER) and find_schema(path) is None:
            unnamed.append(path)
        if new == text:
            continue
        changed += 1
        if args.check:
            sys.stdout.write(f"would reformat {path}\n")
            if args.diff:
                sys.stdout.writelines(
                    difflib.unified_diff(text.splitlines(True), new.splitlines(True), f"{path}", f"{path} (formatted)")
                )
        else:
            try:
                _write(path, new)
            except OSError as exc:
                raise UsageError(f"`{path}`: cannot write: {(exc.strerror or str(exc)).lower()}") from None
            sys.stdout.write(f"reformatted {path}\n")
    if unnamed:
        more = f" (and {len(unnamed) - 1} more)" if len(unnamed) > 1 else ""
        print(
            f"kernelpolicy: note: no `schemas/` folder above `{unnamed[0]}`{more}: no `$schema` line written"
            " (an absolute path of this machine would be committed); `mkdir schemas && kernelpolicy schema"
            " --write schemas` at the repository's root gives editors one, or name one with `--schema URI`",
            file=sys.stderr,
        )
    return 1 if args.check and changed else 0
