"""The figures the benchmarks print, kept where the docs can be checked against them.

A benchmark prints each figure as it measures it and, run with ``--record``, writes it into
``benchmarks/figures.json``: a key, the value in its unit, what was measured, the command, and the
machine, date and load it was measured on. README.md and docs/*.md quote a figure with its key
beside it (``about 1.2 s<!-- figure: check.fleet.cold -->``), and ``tests/test_figures.py`` fails
when a quoted figure is not the recorded one at the precision written, names a key no benchmark
recorded, or when a time, size or ratio in the prose carries no key at all. So a figure changes in
one place (a benchmark run) and the docs follow, or the test says which line to change.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

__all__ = ["FIGURES", "Recorder", "add_record_option"]

FIGURES = Path(__file__).with_name("figures.json")
#: Units a figure may be recorded in (the docs may write a time in any of the time units).
UNITS = ("us", "ms", "s", "min", "MB", "GB", "x", "%")


def add_record_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"write the figures into {FIGURES.relative_to(FIGURES.parent.parent)} (the docs quote them from there)",
    )


class Recorder:
    """Collects one benchmark run's figures; :meth:`save` merges them into :data:`FIGURES`."""

    def __init__(self, benchmark: str, *, record: bool) -> None:
        self.benchmark = benchmark
        self.record = record
        self.figures: dict[str, dict[str, Any]] = {}
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        now = datetime.datetime.now(datetime.timezone.utc)
        self.machine = f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}"
        self.measured = f"{now:%Y-%m-%d %H:%M} UTC, load average {load:.1f}"

    def add(self, key: str, value: float, unit: str, what: str) -> float:
        """Keep *value* (in *unit*) under *key*; returns it for printing."""
        if unit not in UNITS:
            raise ValueError(f"unit `{unit}` is not one of {', '.join(UNITS)}")
        self.figures[key] = {
            "value": round(value, 4),
            "unit": unit,
            "what": what,
            "benchmark": self.benchmark,
            "measured": self.measured,
            "machine": self.machine,
        }
        return value

    def save(self) -> None:
        if not self.record or not self.figures:
            return
        doc = json.loads(FIGURES.read_text(encoding="utf-8")) if FIGURES.is_file() else {}
        figures = doc.get("figures", {})
        figures.update(self.figures)
        doc = {
            "generated_by": "the benchmarks under benchmarks/, run with --record (do not edit)",
            "figures": dict(sorted(figures.items())),
        }
        tmp = FIGURES.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        tmp.replace(FIGURES)
        print(f"recorded {len(self.figures)} figures in {FIGURES}", file=sys.stderr)
