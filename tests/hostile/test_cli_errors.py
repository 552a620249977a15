"""Internal errors that used to be reachable: each ends in exit 0-3 and one line, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import SEED, SRC, cli, cli_subprocess, one_error_line

CASE = "given: {gpu: sm121, model: Qwen/Qwen3.6-35B-A3B-FP8%s}\nexpect: {%s}\n"


@pytest.mark.parametrize(
    ("given", "expect", "field"),
    [
        (", facts: [1, 2]", "dense: cutlass", "given.facts"),
        (", env: [A]", "dense: cutlass", "given.env"),
        (", policy: 5", "dense: cutlass", "given.policy"),
        (", moe_backend: [triton]", "dense: cutlass", "given.moe_backend"),
        ("", "warmup: 3", "expect.warmup"),
        ("", "rules: [1]", "expect.rules"),
        ("", "rules: {dense: 3}", "expect.rules"),
        ("", "dense: {not: 3}", "expect.dense"),
        ("", "dense: [cutlass]", "expect.dense"),
        ("", "warnings: {a: 1}", "expect.warnings"),
        ("", "error: [x]", "expect.error"),
    ],
)
def test_wrong_typed_case_fields(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, given: str, expect: str, field: str
) -> None:
    case = tmp_path / "case.yaml"
    case.write_text(CASE % (given, expect))
    code, out, err = cli(capsys, "test", str(case))
    assert code == 1, err
    assert f"`{field}` must be" in out
    assert err == ""


def test_case_facts_of_the_wrong_kind_fail_the_case(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    case = tmp_path / "case.yaml"
    case.write_text(CASE % (", facts: {gpu.sm: 5}", "dense: cutlass"))
    code, out, _ = cli(capsys, "test", str(case))
    assert code == 1
    assert "fact `gpu.sm`" in out


def test_model_under_an_unknown_home(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "explain", "--gpu", "sm121", "--model", "~nouser-kp/x")
    assert code == 2
    assert one_error_line(err).startswith("kernelpolicy: error: unknown model `~nouser-kp/x`")


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["explain"], ["explain", "--gpu"], ["nosuch"], ["explain", "--gpu", "sm121", "--bogus"], []):
        code, _, err = cli(capsys, *argv)
        assert code == 2
        assert "see `kernelpolicy" in one_error_line(err)


def test_closed_stdout() -> None:
    run = cli_subprocess(*SEED, timeout=120, close_stdout=True)
    assert run.returncode == 2
    assert one_error_line(run.stderr) == "kernelpolicy: error: standard output is closed: nowhere to write the result"


def test_full_stdout() -> None:
    with Path("/dev/full").open("w") as full:
        run = cli_subprocess(*SEED, stdout=full.fileno(), timeout=120)
    assert run.returncode == 2
    assert one_error_line(run.stderr) == "kernelpolicy: error: cannot write the output: no space left on device"


def test_broken_pipe_is_quiet() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with subprocess.Popen(  # `kernelpolicy explain --json | head -c1`
        [sys.executable, "-m", "kernelpolicy", *SEED, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.read(1) == b"{"
        child.stdout.close()
        assert child.wait(timeout=120) == 0
        assert child.stderr.read() == b""


@pytest.mark.parametrize(
    "argv",
    [
        ["explain", "--gpu", "sm121", "--config", "~nouser-kp/x.yaml"],
        ["vllm", "audit", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--python", "~nouser-kp/py"],
    ],
)
def test_other_paths_under_an_unknown_home(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = cli(capsys, *argv)
    assert code == 2
    assert "~nouser-kp/" in one_error_line(err)
