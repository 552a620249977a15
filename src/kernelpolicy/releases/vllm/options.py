"""Every option string of each vLLM release's serve-line parser (``options.json``), for reading
a launch line as that release's parser reads it: vLLM's ``FlexibleArgumentParser`` keeps
argparse's ``allow_abbrev``, so ``--tensor-parallel 2`` is ``--tensor-parallel-size 2`` where no
other option starts so, and a prefix of several options is refused.

The file is written from each release's own parser (its venv:
``python -m kernelpolicy.engines.vllm.testing.options``) and checked against it in
``tests/vllm/test_spellings.py``. A release with no entry is read with the options of the
nearest older release that has one (the oldest, for a release before every entry).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from packaging.version import InvalidVersion, Version

__all__ = ["OPTIONS_FILE", "launch_options", "options_for"]

#: Generated from each release's parser, never edited.
OPTIONS_FILE: Final = Path(__file__).with_name("options.json")


@functools.cache
def launch_options() -> Mapping[str, Mapping[str, str]]:
    """Release -> every option string of its serve-line parser -> the option's ``dest``."""
    if not OPTIONS_FILE.is_file():
        return {}
    releases: Mapping[str, Mapping[str, str]] = json.loads(OPTIONS_FILE.read_text(encoding="utf-8"))["releases"]
    return releases


def options_for(release: str | None) -> tuple[str, Mapping[str, str]] | None:
    """``(release read, options)`` for *release* (the newest release with options when None):
    its own entry, else the nearest older one's, else the oldest; None when the file has none."""
    known = launch_options()
    if not known:
        return None
    ordered = sorted(known, key=Version)
    chosen = ordered[-1]
    if release is not None:
        try:
            wanted = Version(release)
        except (InvalidVersion, ValueError):
            wanted = None
        if wanted is not None:
            older = [r for r in ordered if Version(r) <= wanted]
            chosen = older[-1] if older else ordered[0]
    return chosen, known[chosen]
