"""Unbounded reads: devices, FIFOs, empty paths, the root folder, link loops, huge files.

Each must end at once with exit status 2 and one line naming the path, never hang or read on.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.dsl._source import MAX_BYTES, MAX_WALK, SourceError, SourceFile, yaml_files_under
from kernelpolicy.errors import PolicyError, UsageError

from .helpers import SEED, cli, cli_subprocess, one_error_line

POLICY = "rules:\n  - id: mine\n    when: {gpu.family: sm120}\n    deny: deep_gemm\n    severity: perf\n    because: x\n    refs: [a#1]\n"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    os.mkfifo(p)
    return p


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.symlink_to(b)
    b.symlink_to(a)
    return a


def test_dev_zero_is_refused_unread(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, *SEED, "--policy", "/dev/zero")
    assert code == 2
    assert one_error_line(err) == "kernelpolicy: /dev/zero: error: cannot read file: a device, not a regular file"


def test_fifo_policy_does_not_hang(fifo: Path) -> None:
    run = cli_subprocess(*SEED, "--policy", str(fifo), timeout=60)  # a hang would time out
    assert run.returncode == 2
    assert one_error_line(run.stderr).endswith(f"{fifo}: error: cannot read file: a FIFO, not a regular file")


def test_fifo_case_file_does_not_hang(fifo: Path) -> None:
    run = cli_subprocess("test", str(fifo), timeout=60)
    assert run.returncode == 2
    assert "kernelpolicy: error:" in one_error_line(run.stderr)


def test_empty_policy_path_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, *SEED, "--policy", "")
    assert code == 2
    assert "a policy path is empty" in one_error_line(err)
    with pytest.raises(UsageError, match="empty"):
        kp.load_policy("")


def test_root_folder_ends_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = cli(capsys, *SEED, "--policy", "/")
    assert code == 2
    assert f"more than {MAX_WALK} entries" in one_error_line(err)


def test_walk_is_bounded(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i}.txt").write_text("")
    with pytest.raises(SourceError, match="more than 20 entries"):
        yaml_files_under(tmp_path, limit=20)
    assert yaml_files_under(tmp_path, limit=100) == []


def test_link_loop_file(capsys: pytest.CaptureFixture[str], loop: Path) -> None:
    code, _, err = cli(capsys, *SEED, "--policy", str(loop))
    assert code == 2
    assert "too many levels of symbolic links" in one_error_line(err)


def test_folder_link_loop_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "pol"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "up").symlink_to(root, target_is_directory=True)  # a loop through a folder link
    (root / "mine.yaml").write_text(POLICY)
    assert yaml_files_under(root) == [root / "mine.yaml"]
    kp.load_policy(root, environ=False)  # loads the one file, once


def test_folder_without_policy_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = cli(capsys, *SEED, "--policy", str(tmp_path))
    assert code == 2
    assert "folder holds no policy files" in one_error_line(err)


def test_file_over_the_bound_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: the size is checked before any byte is read
    code, _, err = cli(capsys, *SEED, "--policy", str(big))
    assert code == 2
    assert f"file is larger than {MAX_BYTES} bytes" in one_error_line(err)


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"rules: \xff\xfe\n")
    code, _, err = cli(capsys, *SEED, "--policy", str(bad))
    assert code == 2
    assert "not UTF-8 text" in one_error_line(err)


def test_source_file_reads_are_bounded(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="a device"):
        SourceFile(Path("/dev/zero"), "zero", "policy").read_text()
    with pytest.raises(SourceError, match="a folder"):
        SourceFile(tmp_path, "here", "policy").read_text()


def test_load_policy_takes_one_path_as_a_str(tmp_path: Path) -> None:
    p = tmp_path / "mine.yaml"
    p.write_text(POLICY)
    policy = kp.load_policy(str(p), environ=False)
    assert "mine" in policy.by_id
    assert "mine" in kp.load_policy(p, environ=False).by_id  # a Path too


def test_load_policy_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as err:
        kp.load_policy("x.yaml", environ=False)
    assert str(err.value) == "x.yaml: error: cannot read file: no such file or directory"


def test_load_policy_rejects_non_paths() -> None:
    # a wrong type is a TypeError naming the parameter, as everywhere in the API (docs/design.md)
    with pytest.raises(TypeError, match="kernelpolicy.load_policy: `paths` must be a path or a list of paths"):
        kp.load_policy([3], environ=False)  # type: ignore[list-item]
