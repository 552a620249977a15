"""`kernelpolicy knowledge stale` says its horizon (issue 36): which releases the shipped data was
scanned from, so "0 stale" is read as "0 stale up to these releases"; its help names no source path."""

from __future__ import annotations

import contextlib
import json

import pytest
from packaging.version import Version

from kernelpolicy.cli import main
from kernelpolicy.releases.packages import CONTENTS_FILE
from kernelpolicy.releases.sglang.versions import release_records as sglang_records
from kernelpolicy.releases.vllm.versions import release_records as vllm_records


def _newest(versions: object) -> str:
    return max((str(v) for v in versions), key=Version)  # type: ignore[attr-defined]


def test_the_text_report_ends_with_the_newest_scanned_release_of_each_engine_and_package(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["knowledge", "stale"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("horizon: ")
    assert f"vLLM 0.24.0-{_newest(vllm_records())}" in last
    assert f"SGLang 0.5.12-{_newest(sglang_records())}" in last
    packages = json.loads(CONTENTS_FILE.read_text(encoding="utf-8"))["packages"]
    for name, versions in packages.items():
        assert f"`{name}` " in last and _newest(versions) in last
    assert "a later release is not read" in last


def test_the_json_report_carries_the_horizon(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "stale", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["horizon"]["engines"]["vllm"].endswith(_newest(vllm_records()))
    assert set(doc["horizon"]["code"]) == set(json.loads(CONTENTS_FILE.read_text(encoding="utf-8"))["packages"])


@pytest.mark.parametrize("argv", [["knowledge", "--help"], ["knowledge", "stale", "--help"]])
def test_help_names_no_source_tree_path(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.suppress(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    assert "src/" not in out and ".json" not in out
    assert "horizon" in out or "refresh" in out
