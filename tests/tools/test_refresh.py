"""The one command that re-makes every generated table for new engine releases (issue 34): its
steps are the real scanners, in order, each a module that runs (``--help``), downloads only what
it was asked for, and ends with the generation of the rule files and docs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from kernelpolicy.tools.refresh import commands, fetches, main


def _modules(steps: list[list[str]]) -> list[str]:
    return [s[s.index("-m") + 1] for s in steps if "-m" in s]


def test_an_offline_refresh_downloads_nothing_and_ends_in_the_generation() -> None:
    steps = commands([], ["0.5.99"], [], offline=True)
    assert fetches(["0.99.0"], ["0.5.99"], offline=True) == []
    mods = _modules(steps)
    assert "pip" not in mods and mods[-1] == "kernelpolicy._docs"
    assert "kernelpolicy.releases.packages._scan" in mods and steps[-2][-1:] == ["--offline"]


def test_new_releases_are_fetched_first_and_every_step_is_a_module_that_runs() -> None:
    steps = commands(["0.99.0"], ["0.5.99"], [], offline=False)
    assert steps[0] == [sys.executable, "-m", "kernelpolicy.releases.vllm._scan", "--published", "--download", "0.99.0"]
    assert any("sglang==0.5.99" in s for s in steps)
    for module in dict.fromkeys(_modules(steps)):
        if module == "pip":
            continue
        assert importlib.util.find_spec(module) is not None, module
        if module != "kernelpolicy._docs":  # _docs writes files: its `--help` is not a dry run
            done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False)
            assert done.returncode == 0, (module, done.stderr[-500:])


def test_the_plan_prints_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--plan", "--offline"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].endswith("-m kernelpolicy._docs") and all(line.startswith("$ ") for line in out)
