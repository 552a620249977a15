"""``kernelpolicy facts``: what this machine is, in one screen (or one JSON object).

Exit status 0 whether or not there is a GPU: "no GPU" is a fact, with its reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import argparse

    from ..facts.machine import MachineFacts
    from ..facts.providers import Context

__all__ = ["add_parser", "render_text", "run"]


def add_parser(subparsers: Any) -> None:
    """Add the ``facts`` subcommand to *subparsers* (from ``add_subparsers``)."""
    p = subparsers.add_parser(
        "facts",
        help="what this machine is: GPU, driver, packages, DeepGEMM build, probes",
        description="Gather this machine's facts (NVML, package metadata, optional live probes), each with its source.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--probe",
        action="store_true",
        help="also run live probes in child processes (DeepGEMM SF transform, Triton compiles)",
    )
    p.add_argument("--refresh", action="store_true", help="ignore cached probe results")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--cache-dir", type=Path, default=None, help="where cached results live")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds each probe may take (default 300)")
    p.set_defaults(run=run)


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def render_text(m: MachineFacts) -> str:
    """Pure: the one-screen summary."""
    lines = []
    if m.gpu is None:
        lines.append(f"gpu: none ({m.gpu_reason})")
    else:
        g = m.gpu
        extra = []
        if g.memory_mib is not None:
            extra.append(f"{g.memory_mib} MiB")
        if g.unified_memory:
            extra.append("unified memory")
        tail = f", {', '.join(extra)}" if extra else ""
        lines.append(f"gpu: {g.name or '?'} x{g.count} ({g.sm or 'unknown sm'}, cc {g.cc}{tail}) [{g.source}]")
    width = max((len(k) for k in m.values), default=0)
    for key in sorted(m.values):
        lines.append(f"  {key:<{width}}  {_fmt(m.values[key])}  [{m.sources.get(key, '?')}]")
    if m.notes:
        lines.append("notes:")
        lines.extend(f"  - {n}" for n in m.notes)
    cached = [n for n, i in m.providers.items() if i.get("cached")]
    if cached:
        lines.append(f"cached: {', '.join(cached)} (--refresh to gather again)")
    return "\n".join(lines)


def run(args: argparse.Namespace, out: TextIO | None = None, *, context: Context | None = None) -> int:
    """Run ``kernelpolicy facts``; always 0 (no GPU is a fact, not an error)."""
    from ..facts.machine import gather
    from ..facts.providers import Context

    stream = out or sys.stdout
    timeout = float(getattr(args, "timeout", 300.0))
    ctx = context or Context(timeout_s=timeout)
    machine = gather(
        probe=bool(getattr(args, "probe", False)),
        refresh=bool(getattr(args, "refresh", False)),
        cache_dir=getattr(args, "cache_dir", None),
        use_cache=not getattr(args, "no_cache", False),
        context=ctx,
    )
    if getattr(args, "json", False):
        stream.write(json.dumps(machine.to_json(), indent=2, sort_keys=False, default=str) + "\n")
    else:
        stream.write(render_text(machine) + "\n")
    return 0
