"""Round four's hostile-input benchmark (issue #38), kept from rotting: its generators make the
families the report describes (over a thousand inputs over the 15 classes), and a sample of each
class, run through the benchmark's own runner (a new process in its own folder and cache, as a
user runs it), keeps the contract: a documented status, one line for a refusal, under 5 s of CPU
and 1 GB, nothing executed, nothing lost. benchmarks/bench_hostile.py --round-four runs them all.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .helpers import bench_hostile

ROOT = Path(__file__).resolve().parents[2]


bench = bench_hostile()
#: The inputs of each class, made once (a second or so).
INPUTS = {name: make() for name, make in bench.CLASSES.items()}
#: How many inputs of each class run here (the cheapest: no warm cache to build), spread over the class.
PER_CLASS = 2


def test_the_generators_make_the_report_s_families() -> None:
    """15 classes, over a thousand inputs, each class at least the count the report tried."""
    counts = {name: len(inputs) for name, inputs in INPUTS.items()}
    assert len(counts) == 15 and sum(counts.values()) >= 1_000, counts
    report = {"proof lock": 27, "bench": 71, "engine venvs": 30, "scoped": 29, "YAML in": 180, "locales": 127}
    report |= {"stdin": 69, "launch": 54, "fleet": 30, "environment": 254, "odd process": 55, "full disk": 18}
    report |= {"long argv": 19, "the plugins": 10, "completion": 45}
    for start, least in report.items():
        (name,) = [n for n in counts if n.startswith(start)]
        assert counts[name] >= least, (name, counts[name], least)
    labels = [inp.label for inputs in INPUTS.values() for inp in inputs]
    assert len(set(labels)) == len(labels), "two inputs share a label"


#: Inputs left out of the sample: each runs several checks or a cold proof (seconds of CPU each),
#: or builds thousands of files; the full run has them.
_COSTLY = ("5,000", "SIG", "cold", "two checks", "stopped", "saved while", "20,000 cached", "certificate", "check/")


def _sample(inputs: list[object]) -> list[object]:
    chosen = [inp for inp in inputs if not any(word in inp.label for word in _COSTLY)]  # type: ignore[attr-defined]
    per = 1 if chosen and chosen[0].warm else PER_CLASS  # type: ignore[attr-defined]  # a check: one
    step = max(1, len(chosen) // per)
    return chosen[::step][:per]


def _id(name: str, label: str) -> str:
    return re.sub(r"[^\w .,=:'+-]", "?", f"{name.split(':', maxsplit=1)[0].split(' (', maxsplit=1)[0]}: {label}")[:90]


SAMPLE = [pytest.param(inp, id=_id(name, inp.label)) for name, inputs in INPUTS.items() for inp in _sample(inputs)]


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark's warm cache (the shipped tables' certificate), built once for the module."""
    return bench._warm_cache(tmp_path_factory.mktemp("warm"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("inp", SAMPLE)
def test_a_sample_of_each_class_keeps_the_contract(inp: object, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    cache = request.getfixturevalue("warm") if inp.warm else None  # type: ignore[attr-defined]
    out = bench.run_input(inp, tmp_path / "input", cache)
    assert not out.breaches, (out.breaches, out.code, out.err[-600:])


def test_a_breach_is_seen(tmp_path: Path) -> None:
    """The runner marks what breaks the contract: a traceback, an undocumented status, a file
    lost, something executed (a runner that sees nothing would pass every input)."""
    script = "import sys, pathlib; pathlib.Path('kept').unlink(); pathlib.Path('PWN').touch(); raise SystemExit(7)"
    inp = bench.Input("a breaking input", [], script=script, files={"kept": "x"})
    out = bench.run_input(inp, tmp_path / "a")
    assert {"status 7", "something was executed", "lost or changed: kept"} <= set(out.breaches), out.breaches
    crash = bench.Input("a traceback", [], script="raise ValueError('x')")
    assert "a traceback or an internal error" in bench.run_input(crash, tmp_path / "b").breaches
    two = bench.Input("two lines", [], script="import sys; print('a\\nb', file=sys.stderr); sys.exit(2)")
    assert "2 lines on stderr for a refusal" in bench.run_input(two, tmp_path / "c").breaches


def _input(label: str) -> object:
    (found,) = [inp for inputs in INPUTS.values() for inp in inputs if inp.label == label]
    return found


# -- what the first full run found, each input run as the benchmark ran it ---------------------


@pytest.mark.parametrize(
    "label",
    [
        "fmt --check of 60,000 top-level keys",
        "fmt (in place) of 40,000 entries on one line",
    ],
)
def test_fmt_of_a_file_too_large_to_lay_out_is_one_line_at_once(label: str, tmp_path: Path) -> None:
    """``fmt`` laid out whatever the loader's guards let through: 60,000 top-level keys took 9.5 s
    of CPU, 40,000 flow entries on one line over a minute (killed); now one line, in about a second,
    the file left as it was."""
    out = bench.run_input(_input(label), tmp_path / "input")
    assert not out.breaches, (out.breaches, out.err)
    assert out.code == 2 and "more than fmt lays out (20,000): left as it is" in out.err, out.err
    assert out.cpu < 3.0, out.cpu
