"""`explain --summary` prints the line the vLLM plugin logs at start-up for the same decision."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.adapters.vllm import _summary
from kernelpolicy.cli import main

PLUGIN = Path(__file__).resolve().parents[2] / "src" / "kernelpolicy" / "adapters" / "vllm" / "__init__.py"


def test_summary_is_the_plugins_start_up_line(policy: kp.Policy, capsys: pytest.CaptureFixture[str]) -> None:
    # the plugin's own format string, as it logs it
    (fmt,) = re.findall(r'"(kernelpolicy: vllm %s %s %s fingerprint=%s)"', PLUGIN.read_text(encoding="utf-8"))
    argv = ["--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--engine", "vllm==0.26.0", "--no-env"]
    assert main(["explain", *argv, "--summary"]) == 0
    out = capsys.readouterr().out
    facts = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", facts={"vllm.version": "0.26.0"},
                         policy=policy)
    decision = kp.resolve(facts, policy)
    assert out == fmt % ("0.26.0", "sm121", _summary(decision), decision.fingerprint) + "\n"
