"""Round four, R5: ``bench --report`` and ``--emit-policy``. The report is read with a bound
and the JSON guards of every other input (a FIFO hung, ``/dev/zero`` read until memory ran out,
deep or non-finite JSON and wrong-typed fields were internal errors), its text never reaches the
emitted policy as YAML (a ``model`` holding a newline wrote a live ``implies:`` section), and the
policy is written at once (a file-size limit cut an existing file to 660 bytes and exited 0)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import kernelpolicy as kp

from .helpers import SRC, cli, cli_subprocess, one_error_line

MEASURED = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "2026-12-04-h200-bench"
#: A real report: a failed candidate a shipped rule calls valid, so --emit-policy writes rules.
REAL = MEASURED / "Qwen3-32B-FP8.json"


def _report(tmp_path: Path, edit: Any = None, name: str = "r.json") -> Path:
    data = json.loads(REAL.read_text())
    if edit is not None:
        edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _bench(*argv: str, timeout: float = 60, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    if fsize is None:
        return cli_subprocess("bench", *argv, timeout=timeout)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, "-m", "kernelpolicy", "bench", *argv]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=limit)


def test_report_on_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a device")):
        started = time.monotonic()
        run = _bench("--report", str(path))
        assert time.monotonic() - started < 30
        assert run.returncode == 2
        assert (
            one_error_line(run.stderr) == f"kernelpolicy: error: `{path}`: cannot be read ({kind}, not a regular file)"
        )


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def edit(data: Any) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000 + "]" * 100_000, "not JSON kernelpolicy reads: nested too deeply"),
        (REAL.read_text().replace('"n": 10240', '"n": Infinity', 1), "`Infinity` is not a number JSON has"),
        (REAL.read_text().replace('"us": 26.544', '"us": 1e999', 1), "`1e999` is too large a number"),
        ('{"schema": "kernelpolicy.bench/1", "model": ' + "9" * 5000 + "}", "a number too large"),
        ("[1, 2]", "not a bench report: not a JSON object"),
    ],
)
def test_report_json_outside_the_guards_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, why: str
) -> None:
    bad = tmp_path / "r.json"
    bad.write_text(text)
    code, out, err = cli(capsys, "bench", "--report", str(bad))
    assert code == 2 and out == ""
    assert why in one_error_line(err)


EMIT = ["--emit-policy", "out.yaml"]


@pytest.mark.parametrize(
    ("edit", "mode", "field"),
    [  # as the report found them: an internal AttributeError, TypeError (--json), math domain error (--emit-policy)
        (_set(("deployment",), [1, 2]), [], "`deployment` must be an object"),
        (_set(("versions",), "torch"), [], "`versions` must be an object"),
        (_set(("protocol",), 5), [], "`protocol` must be an object"),
        (_set(("model",), ["x"]), EMIT, "`model` must be a string"),
        (_set(("cells", 0, "outcomes", 0, "spread"), "wide"), ["--json"], "`cells[0].outcomes[0].spread` must be a fi"),
        (
            _set(("cells", 0, "outcomes", 0, "error"), "big"),
            ["--json"],
            "`cells[0].outcomes[0].error` must be a finite",
        ),
        (_set(("cells", 0, "outcomes", 0, "us"), -5.0), EMIT, "`cells[0].outcomes[0].us` must be a finite number of"),
        (_set(("cells", 0, "n"), "10240"), [], "`cells[0].n` must be a whole number"),
        (_set(("cells", 0, "outcomes", 0, "status"), "fast"), [], "`cells[0].outcomes[0].status` must be one of"),
        (_set(("candidates", "dense", 0, "valid"), "yes"), EMIT, "`candidates.dense[0].valid` must be true or false"),
    ],
)
def test_a_report_field_of_the_wrong_type_is_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit: Any,
    mode: list[str],
    field: str,
) -> None:
    report = _report(tmp_path, edit)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "bench", "--report", str(report), *mode)
    assert code == 2, err
    assert field in one_error_line(err)
    assert out == "" and not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize("field", ["model", "machine", "date"])
def test_report_text_never_reaches_the_emitted_policy_as_yaml(tmp_path: Path, field: str) -> None:
    evil = "x\nimplies:\n  - id: evil\n    when: {gpu.sm: sm90}\n    set: {deep_gemm.source: none}\n\u2028rules: []"
    report = _report(tmp_path, _set((field,), evil))
    out = tmp_path / "out.yaml"
    run = _bench("--report", str(report), "--emit-policy", str(out))
    # a saved report re-rendered is exit 0 (issue 36); its failure of a shipped candidate is said, not a finding
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    assert list(yaml.safe_load(text)) == ["rules"]  # no live `implies:`
    assert all(line.startswith("#") for line in text.splitlines()[:3])
    assert "x\\u000aimplies:" in text
    # the same rules as the report without the text (only the header's comment differs)
    clean = tmp_path / "clean.yaml"
    assert _bench("--report", str(REAL), "--emit-policy", str(clean)).returncode == 0
    rules, emitted = yaml.safe_load(clean.read_text())["rules"], yaml.safe_load(text)["rules"]
    assert [{**r, "refs": None} for r in emitted] == [{**r, "refs": None} for r in rules] != []
    if field != "model":  # the machine and the date are cited in each rule's refs: a plain string there
        assert all(evil in r["refs"][0] for r in emitted)
    assert kp.load_policy(str(out), environ=False)  # a policy the loader takes


def test_emit_policy_under_a_file_size_limit_keeps_the_old_file(tmp_path: Path) -> None:
    old = tmp_path / "policy.yaml"
    old.write_text("# the operator's own\n" + "rules: []\n" + "#" * 40_000 + "\n")
    before = old.read_bytes()
    run = _bench("--report", str(REAL), "--emit-policy", str(old), fsize=512)
    assert run.returncode == 2
    assert "--emit-policy" in one_error_line(run.stderr) and "file too large" in run.stderr
    assert old.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.yaml"]  # no temporary file left


def test_emit_policy_never_overwrites_the_report(tmp_path: Path) -> None:
    report = _report(tmp_path)
    before = report.read_bytes()
    run = _bench("--report", str(report), "--emit-policy", str(report))
    assert run.returncode == 2 and run.stdout == ""
    assert "is the --report file" in one_error_line(run.stderr)
    assert report.read_bytes() == before


@pytest.mark.parametrize(("name", "why"), [("", "an empty file name"), ("fifo", "a FIFO, not a regular file")])
def test_emit_policy_that_cannot_be_written_is_said_first(tmp_path: Path, name: str, why: str) -> None:
    os.mkfifo(tmp_path / "fifo")
    target = str(tmp_path / name) if name else ""
    started = time.monotonic()
    run = _bench("--report", str(REAL), "--emit-policy", target)
    assert time.monotonic() - started < 30
    assert run.returncode == 2 and run.stdout == ""
    assert one_error_line(run.stderr) == f"kernelpolicy: error: --emit-policy `{target}`: {why}"


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_threshold_that_is_not_a_fraction_is_refused(tmp_path: Path, value: str) -> None:
    run = _bench("--report", str(REAL), "--emit-policy", str(tmp_path / "p.yaml"), "--threshold", value)
    assert run.returncode == 2
    assert "--threshold" in one_error_line(run.stderr)
    assert not (tmp_path / "p.yaml").exists()


def test_the_real_reports_still_replay(capsys: pytest.CaptureFixture[str]) -> None:
    for report in sorted(MEASURED.glob("*.json")):
        code, out, err = cli(capsys, "bench", "--report", str(report), "--json")
        assert code in (0, 1), (report.name, err)
        assert json.loads(out)["cells"] == json.loads(report.read_text())["cells"]
