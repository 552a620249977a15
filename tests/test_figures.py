"""Every figure the docs quote is one a benchmark printed and recorded (issue 36: published figures
contradicted each other and no test looked at them).

``benchmarks/figures.json`` is written by the benchmarks (``--record``, see
``benchmarks/_figures.py``). In README.md and docs/*.md (the generated conformance tables and the
GPU measurement reports, rendered by ``bench --report`` from the raw JSON beside them, aside):

- a figure is quoted with its key, ``1.2 s<!-- figure: check.fleet.cold -->``, and must be the
  recorded value at the precision written (``1.2`` is 1.15 to 1.25 of the recorded unit);
- a block of a benchmark's printed output has ``<!-- printed: benchmarks/NAME.py -->`` above its
  fence, and each of its lines must start with what a figure of that benchmark measured and show
  its recorded value;
- a GPU measurement is quoted in a paragraph that cites its report (``docs/measurements/*.md``,
  rendered by ``kernelpolicy bench --report`` from the raw JSON beside it) and must appear there;
- any other time, size or ratio in prose fails, unless the words before it make it a limit, a
  setting or a past figure (``at most 1 MB``, ``default 120 s``, ``was 165-240 s``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "benchmarks" / "figures.json"
#: Generated or rendered from raw data beside them: not prose a person writes figures into.
NOT_PROSE = {"vllm-conformance.md", "sglang-conformance.md"}
DOCS = (ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in NOT_PROSE))

_NUM = r"\d[\d,]*(?:\.\d+)?"
_UNIT = r"us|ms|seconds?|s|minutes?|min|MB|GB|x|%"
_TAGGED = re.compile(rf"(?P<num>{_NUM})\s?(?P<unit>{_UNIT})\s*<!-- figure: (?P<key>[\w.-]+) -->")
_ANY = re.compile(rf"(?<![\w.#-])(?P<num>{_NUM})(?:\s?-\s?{_NUM})?\s?(?P<unit>{_UNIT})(?![\w])")
_PRINTED = re.compile(r"^<!-- printed: (?P<bench>benchmarks/[\w.]+) -->$")
_FENCE = re.compile(r"^\s*```")
_REPORT = re.compile(r"docs/measurements/[\w.-]+\.md")
_CODE = re.compile(r"`[^`]*`")
#: Words that make the number after them a limit, a setting, a target or a past figure.
_NOT_MEASURED = re.compile(
    r"\b(?:at most|under|below|default|target|timeout|limit|budget|within|up to|over|was|were|from|than|"
    r"every|after|each|per|cap|caps|capped|waits?|past|beyond|exceeds?|longer|the first|size|of|took|takes? up to)"
    r"(?:\s+about)?\s*~?$"
    r"|[<>≤≥]=?\s*~?$"
)
_SCALE = {"us": ("s", 1e-6), "ms": ("s", 1e-3), "s": ("s", 1.0), "second": ("s", 1.0), "seconds": ("s", 1.0)}
_SCALE |= {"min": ("s", 60.0), "minute": ("s", 60.0), "minutes": ("s", 60.0), "MB": ("MB", 1.0), "GB": ("MB", 1e3)}
_SCALE |= {"x": ("x", 1.0), "%": ("%", 1.0)}


@dataclass(frozen=True)
class Quote:
    file: str
    line: int
    text: str
    num: str
    unit: str
    key: str | None


def _figures() -> dict[str, dict[str, object]]:
    return dict(json.loads(FIGURES.read_text(encoding="utf-8"))["figures"])


def _matches(num: str, unit: str, figure: dict[str, object]) -> bool:
    """Whether *num* *unit* as written is the recorded figure at the written precision."""
    written = float(num.replace(",", ""))
    decimals = len(num.split(".")[1]) if "." in num else 0
    base, scale = _SCALE[unit]
    fbase, fscale = _SCALE[str(figure["unit"])]
    if base != fbase:
        return False
    recorded = float(str(figure["value"])) * fscale / scale
    return abs(recorded - written) <= 0.5 * 10.0**-decimals + 1e-9


def _paragraph_reports(lines: list[str]) -> dict[int, tuple[str, ...]]:
    """Per 1-based line, the measurement reports its paragraph cites."""
    out: dict[int, tuple[str, ...]] = {}
    start = 0
    for end in [*(i for i, line in enumerate(lines) if not line.strip()), len(lines)]:
        cited = tuple(sorted({r for line in lines[start:end] for r in _REPORT.findall(line)}))
        for i in range(start, end):
            out[i + 1] = cited
        start = end + 1
    return out


def _in_report(text: str, reports: tuple[str, ...]) -> bool:
    """Whether every number of *text* is written in one of the cited *reports*."""
    numbers = re.findall(_NUM, text)
    for report in reports:
        body = (ROOT / report).read_text(encoding="utf-8") if (ROOT / report).is_file() else ""
        if numbers and all(re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", body) for n in numbers):
            return True
    return False


def _quotes() -> tuple[list[Quote], list[Quote], list[tuple[str, int, str, str]]]:
    """Tagged quotes, untagged figures in prose, and printed-block lines ``(file, line, bench, text)``."""
    tagged: list[Quote] = []
    untagged: list[Quote] = []
    printed: list[tuple[str, int, str, str]] = []
    for path in DOCS:
        name = str(path.relative_to(ROOT))
        lines = path.read_text(encoding="utf-8").splitlines()
        fenced, bench = False, ""
        reports = _paragraph_reports(lines)
        for i, raw in enumerate(lines, 1):
            if _FENCE.match(raw):
                if not fenced:
                    m = _PRINTED.match(lines[i - 2].strip()) if i > 1 else None
                    bench = m.group("bench") if m else ""
                fenced = not fenced
                continue
            if fenced:
                if bench and raw.strip():
                    printed.append((name, i, bench, raw.strip()))
                continue
            for m in _TAGGED.finditer(raw):
                tagged.append(Quote(name, i, m.group(0), m.group("num"), m.group("unit"), m.group("key")))
            prose = _CODE.sub(lambda c: " " * len(c.group(0)), _TAGGED.sub(lambda t: " " * len(t.group(0)), raw))
            for m in _ANY.finditer(prose):
                before = prose[max(0, m.start() - 24) : m.start()]
                if _NOT_MEASURED.search(before.rstrip()) or _in_report(m.group(0), reports.get(i, ())):
                    continue
                untagged.append(Quote(name, i, m.group(0), m.group("num"), m.group("unit"), None))
    return tagged, untagged, printed


TAGGED, UNTAGGED, PRINTED = _quotes()


def test_the_docs_quote_figures() -> None:
    assert len(TAGGED) >= 5 and PRINTED


@pytest.mark.parametrize("quote", TAGGED, ids=lambda q: f"{q.file}:{q.line}:{q.key}")
def test_a_quoted_figure_is_the_recorded_one(quote: Quote) -> None:
    figures = _figures()
    assert quote.key in figures, f"{quote.file}:{quote.line}: no benchmark recorded `{quote.key}`"
    figure = figures[quote.key]
    assert _matches(quote.num, quote.unit, figure), (
        f"{quote.file}:{quote.line}: `{quote.num} {quote.unit}` quotes `{quote.key}`, recorded as "
        f"{figure['value']} {figure['unit']} by {figure['benchmark']} ({figure['measured']}): write that"
    )


def test_no_figure_in_prose_is_unrecorded() -> None:
    loose = [f"{q.file}:{q.line}: `{q.text}`" for q in UNTAGGED]
    assert not loose, (
        "figures in prose that no benchmark recorded (quote a recorded one as `N unit<!-- figure: KEY -->`, "
        "or say it is a limit or a past figure):\n" + "\n".join(loose)
    )


@pytest.mark.parametrize("line", PRINTED, ids=lambda p: f"{p[0]}:{p[1]}")
def test_a_printed_block_shows_the_recorded_figures(line: tuple[str, int, str, str]) -> None:
    file, at, bench, text = line
    mine = {k: f for k, f in _figures().items() if f["benchmark"] == bench}
    found = [(k, f) for k, f in mine.items() if text.startswith(str(f["what"]))]
    assert found, f"{file}:{at}: `{text}` is no figure {bench} recorded"
    key, figure = max(found, key=lambda kf: len(str(kf[1]["what"])))
    m = re.search(rf"({_NUM})\s?({_UNIT})\b", text[len(str(figure["what"])) :])
    assert m and _matches(m.group(1), m.group(2), figure), (
        f"{file}:{at}: `{text}` shows `{key}` other than recorded ({figure['value']} {figure['unit']}, "
        f"{figure['measured']})"
    )


def test_the_checker_reads_quotes_as_the_docs_write_them() -> None:
    fig = {"value": 2026.0, "unit": "s"}
    assert _matches("34", "minutes", fig) and not _matches("24", "minutes", fig)
    assert _matches("1.2", "s", {"value": 1.23, "unit": "s"}) and not _matches("1.2", "s", {"value": 2.4, "unit": "s"})
    assert _matches("120", "ms", {"value": 0.1204, "unit": "s"}) and not _matches(
        "1.2", "x", {"value": 1.2, "unit": "s"}
    )
    assert _ANY.search("the proof takes 16 s") and _NOT_MEASURED.search("at most".rstrip()) is not None
