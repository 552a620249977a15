"""Round four, R10 and R11: what kernelpolicy reads from a path is a regular file read with a
bound (a FIFO as CUDA's ``version.json`` hung ``facts``; ``/dev/zero`` there read until memory
ran out), and what it writes is written at once (``check --sarif-file`` waited on a FIFO and
left a truncated file under a file-size limit)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpolicy.facts.providers._locate import read_assigned_string
from kernelpolicy.facts.providers._nvcc import toolkit_json_version

from .helpers import SRC, cli_subprocess, one_error_line

OP = (
    "rules:\n  - id: r\n    when: {gpu.sm: sm121}\n    paths: [dense]\n    deny: cutlass\n"
    "    severity: perf\n    because: x\n"
)


@pytest.fixture
def toolkit(tmp_path: Path) -> Path:
    """A CUDA toolkit whose nvcc answers at once (its ``version.json`` is up to the test)."""
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text('#!/bin/sh\necho "Cuda compilation tools, release 12.9, V12.9.86"\n')
    nvcc.chmod(0o755)
    return tmp_path / "cuda"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_facts_with_a_version_json_that_is_a_fifo_or_a_device(
    toolkit: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    version = toolkit / "version.json"
    if kind == "fifo":
        os.mkfifo(version)
    else:
        version.symlink_to("/dev/zero")
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    started = time.monotonic()
    run = cli_subprocess("facts", "--json", timeout=60)
    assert time.monotonic() - started < 30
    assert run.returncode == 0, run.stderr
    facts = json.loads(run.stdout)
    # version.json unread, nvcc --version answers instead
    assert "12.9.86" in json.dumps(facts)
    assert toolkit_json_version(toolkit / "bin" / "nvcc") is None


def test_a_version_json_larger_than_any_is_not_read(toolkit: Path) -> None:
    (toolkit / "version.json").write_text(json.dumps({"cuda_nvcc": {"version": "12.9.86"}, "pad": "x" * (2 << 20)}))
    assert toolkit_json_version(toolkit / "bin" / "nvcc") is None
    (toolkit / "version.json").write_text(json.dumps({"cuda_nvcc": {"version": "12.9.86"}}))
    assert toolkit_json_version(toolkit / "bin" / "nvcc") == "12.9.86"


def test_a_package_source_that_is_a_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "__init__.py")
    assert read_assigned_string(tmp_path / "__init__.py", "__version__") is None


def _check(*argv: str, fsize: int | None = None, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``kernelpolicy check`` in a child, under a file-size limit of *fsize* bytes (``ulimit -f``)."""

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "kernelpolicy", "check", *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
        preexec_fn=limit,
    )


def test_sarif_file_on_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    (tmp_path / "op.yaml").write_text(OP)
    os.mkfifo(tmp_path / "fifo")
    run = _check("--bare", "--no-coverage", "op.yaml", "--sarif-file", "fifo", cwd=tmp_path)
    assert run.returncode == 2
    assert one_error_line(run.stderr) == "kernelpolicy: error: --sarif-file `fifo`: a FIFO, not a regular file"


@pytest.mark.parametrize(("name", "why"), [("", "an empty file name"), ("gone/out.sarif", "no such folder `gone`")])
def test_sarif_file_that_cannot_be_written_is_said_before_the_walk(tmp_path: Path, name: str, why: str) -> None:
    (tmp_path / "op.yaml").write_text(OP)
    run = _check("--bare", "--no-coverage", "op.yaml", "--sarif-file", name, cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert one_error_line(run.stderr) == f"kernelpolicy: error: --sarif-file `{name}`: {why}"


def test_sarif_file_under_a_file_size_limit_keeps_the_old_file(tmp_path: Path) -> None:
    """``ulimit -f``: the report's run left a truncated SARIF file (and a full disk the same)."""
    (tmp_path / "op.yaml").write_text(OP)
    old = tmp_path / "out.sarif"
    old.write_text('{"old": true}\n')
    run = _check("--bare", "--no-coverage", "op.yaml", "--sarif-file", "out.sarif", fsize=1024, cwd=tmp_path)
    assert run.returncode == 2
    assert "cannot write it: file too large" in one_error_line(run.stderr)
    assert old.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["op.yaml", "out.sarif"]  # no temporary file left
    run = _check("--bare", "--no-coverage", "op.yaml", "--sarif-file", "out.sarif", cwd=tmp_path)
    assert run.returncode == 1 and json.loads(old.read_text())["version"] == "2.1.0"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_audit_markdown_on_a_fifo_is_refused_before_the_sweep(tmp_path: Path, engine: str) -> None:
    """``--markdown FILE`` was read with ``read_text`` and written in place after a sweep of
    minutes: a FIFO there is now said at once (no engine is started: the python never runs)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    ran = tmp_path / "ran"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch '{ran}'\n")
    python.chmod(0o755)
    extra = ["--matrix", "--gpu", "sm90"] if engine == "vllm" else []
    argv = [engine, "audit", "--python", str(python), "--model", "deepseek-ai/DeepSeek-V3", *extra]
    run = cli_subprocess(*argv, "--markdown", str(fifo), timeout=60)
    assert run.returncode == 2 and not ran.exists()
    assert one_error_line(run.stderr) == f"kernelpolicy: error: --markdown `{fifo}`: a FIFO, not a regular file"


def test_the_conformance_document_is_read_bounded_and_written_at_once(tmp_path: Path) -> None:
    from kernelpolicy._files import ReadError
    from kernelpolicy.engines.vllm.conformance import update_document

    doc = tmp_path / "doc.md"
    update_document(doc, "0.34.0", "| a |\n")
    update_document(doc, "0.26.0", "| b |\n")
    text = doc.read_text()
    assert text.index("| b |") < text.index("| a |")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ReadError, match="a FIFO"):
        update_document(tmp_path / "fifo", "0.34.0", "| a |\n")
