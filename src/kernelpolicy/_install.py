"""The ``pip install`` line that installs this kernelpolicy (with an extra) again, elsewhere.

kernelpolicy is not published on the package index yet, so ``pip install 'kernelpolicy[vllm]'``
fails there (or, were someone else to register the name, installs their code into an engine's
environment). The lines the tool prints come from here instead: from where this copy was
installed, as pip recorded it in the distribution's ``direct_url.json`` (PEP 610): an editable or
plain install of a folder, a VCS URL at its commit, or an archive; failing that, a source
checkout this module runs from; failing that, how to install from a checkout.
"""

from __future__ import annotations

import json
import re
import shlex
from importlib import metadata
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

__all__ = ["ON_INDEX", "install_command", "split_install", "with_install_commands"]

#: Whether kernelpolicy is published on the package index (then a plain ``pip install
#: 'kernelpolicy[X]'`` works for an index install).
ON_INDEX: Final = False
_DIST = "kernelpolicy"
#: ``pip install kernelpolicy`` or ``pip install 'kernelpolicy[a,b]'`` as the rule tables write it.
_INDEX_LINE = re.compile(r"pip install '?kernelpolicy(?:\[(?P<extras>[A-Za-z0-9_,-]+)\])?'?")


def _direct_url() -> dict[str, object] | None:
    """This distribution's ``direct_url.json``, or None (not installed, installed from an index,
    unreadable)."""
    try:
        text = metadata.distribution(_DIST).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _local_path(url: str) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(unquote(parts.path))


def _checkout() -> Path | None:
    """The source checkout this module runs from (``src/kernelpolicy`` under a ``pyproject.toml``)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "rules").is_dir() else None


def install_command(extra: str | None = None) -> str:
    """The command that installs this kernelpolicy, with *extra* (``vllm``, ``fmt``, ...)."""
    suffix = f"[{extra}]" if extra else ""
    info = _direct_url()
    if info is not None:
        url = str(info.get("url", ""))
        dir_info = info.get("dir_info")
        vcs_info = info.get("vcs_info")
        if isinstance(dir_info, dict):
            path = _local_path(url)
            if path is not None and path.is_dir():
                editable = "-e " if dir_info.get("editable") else ""
                return f"pip install {editable}{shlex.quote(f'{path}{suffix}')}"
        elif isinstance(vcs_info, dict) and url:
            vcs, commit = str(vcs_info.get("vcs", "git")), vcs_info.get("commit_id")
            at = f"@{commit}" if commit else ""
            return "pip install " + shlex.quote(f"{_DIST}{suffix}@{vcs}+{url}{at}")
        elif isinstance(info.get("archive_info"), dict) and url:
            path = _local_path(url)
            if path is None or path.is_file():
                return "pip install " + shlex.quote(f"{_DIST}{suffix}@{url}")
    elif ON_INDEX:
        return "pip install " + shlex.quote(f"{_DIST}{suffix}")
    checkout = _checkout()
    if checkout is not None:
        return f"pip install {shlex.quote(f'{checkout}{suffix}')}"
    return (
        f"pip install './kernelpolicy{suffix}'  # beside a clone of kernelpolicy's repository:"
        " it is not on the package index yet"
    )


def split_install(text: str) -> tuple[str, str, str, str]:
    """*text* around its first index install line: the text before it, the command that works
    from this install, a shell comment after that command (``""`` if none) and the text after."""
    m = _INDEX_LINE.search(text)
    if m is None:
        return text, "", "", ""
    command, _, comment = install_command(m.group("extras")).partition("  # ")
    return text[: m.start()], command, comment, text[m.end() :]


def with_install_commands(text: str) -> str:
    """*text* with each ``pip install 'kernelpolicy[X]'`` (as the rule tables write it) replaced
    by :func:`install_command` for that extra."""
    return _INDEX_LINE.sub(lambda m: install_command(m.group("extras")), text)
