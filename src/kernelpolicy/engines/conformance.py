"""What the engines' conformance sweeps share (``kernelpolicy vllm audit --matrix``,
``kernelpolicy sglang audit --matrix``): the GPU families a sweep simulates, the deployment
``explain`` builds for a cell (the side every sweep judges against), an engine error as one
table-safe line without this machine's paths, and the generated document of one section per
release. Each engine's sweep (:mod:`.vllm.conformance`, :mod:`.sglang.conformance`) runs its
engine and judges its own paths on top of these.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ..facts import Facts
    from ..policy import Policy

__all__ = [
    "FAMILIES",
    "PathCount",
    "PathRow",
    "deployment_facts",
    "one_line",
    "path_counts",
    "path_summary",
    "section_of",
    "update_document",
]

#: family -> (compute capability, the product the simulated GPU names)
FAMILIES: Final[dict[str, tuple[tuple[int, int], str]]] = {
    "sm90": ((9, 0), "NVIDIA H100"),
    "sm100": ((10, 0), "NVIDIA B200"),
    "sm120": ((12, 0), "NVIDIA RTX PRO 6000 Blackwell"),
    "sm121": ((12, 1), "NVIDIA GB10"),
}


def deployment_facts(
    policy: Policy,
    model: str,
    family: str,
    target: Mapping[str, object],
    *,
    engine: str,
    env: Mapping[str, str] | None = None,
    moe_backend: str | None = None,
    flags: Mapping[str, object] | None = None,
) -> Facts:
    """What ``explain`` builds for a sweep's deployment (:func:`kernelpolicy.deployment.build.sweep_facts`)
    on *engine*, served with the facts of *flags* (the sweep's launch flags): every sweep judges
    against it."""
    from ..deployment.build import sweep_facts

    _cc, name = FAMILIES[family]
    host = {"gpu.name": name, "host.machine": platform.machine(), "deploy.engine": engine}
    given = dict(flags) if flags is not None else None
    return sweep_facts(policy, model, family, target, host, env=env, moe_backend=moe_backend, flags=given)


def one_line(text: str) -> str:
    """An error as one table-safe line: the whole message, then where it was raised."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    frames = [i for i, x in enumerate(lines) if x.startswith("File ")]
    message = lines[: frames[0]] if frames else lines
    where = lines[frames[-1]] if frames else ""
    text = " ".join(message) + (f" ({where})" if where else "")
    return portable(text).replace("|", "\\|")


_LOCAL_PATHS: Final = (
    (re.compile(r'"[^"]*?/site-packages/'), '"'),  # a venv's files, from its package root
    (re.compile(r"/\S*?/kp-simgpu-[^/\s]+/"), ""),  # the probe's temporary folder
    (re.compile(r"/\S*?/kp-model-[^/\s'\"]+"), "MODEL"),  # the temporary model folder
)


def portable(text: str) -> str:
    """*text* without this machine's paths (the table is checked in and compared)."""
    for pattern, replacement in _LOCAL_PATHS:
        text = pattern.sub(replacement, text)
    return text


def _marker(version: str, engine: str, end: bool = False) -> str:
    return f"<!-- {'end ' if end else ''}{engine} {version} -->"


def section_of(document: str, version: str, engine: str) -> str | None:
    """The generated section of *engine* *version* in *document*, or ``None``."""
    begin, end = _marker(version, engine), _marker(version, engine, end=True)
    match = re.search(re.escape(begin) + r"\n(.*?)" + re.escape(end), document, re.S)
    return match.group(1) if match else None


def update_document(path: Path, version: str, section: str, engine: str, header: str) -> None:
    """Write *section* as *engine* *version*'s part of the document at *path* (others kept,
    sorted, under *header*), at once: the document is read with a bound and replaced through a
    temporary file.

    :raises ReadError: *path* is not a regular file, or larger than any such document.
    :raises OSError: it cannot be written (the old document is kept).
    """
    from packaging.version import Version

    from .._files import read_bounded, write_text_at_once

    text = read_bounded(path, 4_000_000).decode("utf-8", "replace") if os.path.lexists(path) else ""
    sections: dict[str, str] = {}
    for match in re.finditer(rf"<!-- {engine} (\S+) -->\n(.*?)<!-- end {engine} \1 -->", text, re.S):
        sections[match.group(1)] = match.group(2)
    sections[version] = section
    body = [header]
    for v in sorted(sections, key=Version):
        body.append(f"{_marker(v, engine)}\n{sections[v]}{_marker(v, engine, end=True)}\n")
    write_text_at_once(path, "\n".join(body))


# ----------------------------------------------------------------------------- counts per path


@dataclass(frozen=True)
class PathRow:
    """One cell of a sweep as the counts per path see it (each engine's sweep fills it in)."""

    #: the paths the decision has a backend on in this cell (the engine with the plugin could run it)
    decided: tuple[str, ...]
    #: of those, the paths where the engine with the plugin runs another backend (or none)
    differs: frozenset[str] = frozenset()
    #: per path, whether the plugin's own decision names `explain`'s backend (absent: it decided nothing)
    parity: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class PathCount:
    """One path over a sweep: cells it is decided on, where the engine runs the decision, and
    where the plugin decided, where its backend is `explain`'s."""

    path: str
    cells: int
    same: int
    decided: int
    parity: int


def path_counts(rows: Iterable[PathRow], paths: Sequence[str]) -> list[PathCount]:
    """The counts of each of *paths* (in that order) over *rows*; a path no row decides is left out."""
    listed = list(rows)
    out = []
    for path in paths:
        mine = [r for r in listed if path in r.decided]
        if not mine:
            continue
        judged = [r.parity[path] for r in mine if path in r.parity]
        out.append(
            PathCount(
                path,
                len(mine),
                sum(1 for r in mine if path not in r.differs),
                len(judged),
                sum(1 for ok in judged if ok),
            )
        )
    return out


def path_summary(counts: Sequence[PathCount]) -> str:
    """One paragraph of the counts per path (for a sweep's section)."""
    if not counts:
        return "No path was decided."
    same = ", ".join(f"{c.path} {c.same} of {c.cells}" for c in counts)
    parity = ", ".join(f"{c.path} {c.parity} of {c.decided}" for c in counts)
    return (
        f"Per path, the cells where the engine with the plugin runs the decision's backend: {same}. "
        f"Parity per path (the plugin's backend is `explain`'s, where it decided): {parity}."
    )
