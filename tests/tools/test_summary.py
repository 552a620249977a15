"""`explain --summary` prints the line the vLLM plugin logs at start-up for the same decision."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import _parser, main
from kernelpolicy.cli._common import facts_from_args, load_policy_from_args
from kernelpolicy.render.summary import startup_summary as _summary

PLUGIN = Path(__file__).resolve().parents[2] / "src" / "kernelpolicy" / "engines" / "vllm" / "plugin.py"


def test_summary_is_the_plugins_start_up_line(capsys: pytest.CaptureFixture[str]) -> None:
    # the plugin's own format string, as it logs it
    (fmt,) = re.findall(r'"(kernelpolicy: vllm %s %s %s fingerprint=%s)"', PLUGIN.read_text(encoding="utf-8"))
    argv = ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--engine", "vllm==0.26.0", "--no-env"]
    assert main([*argv, "--summary"]) == 0
    out = capsys.readouterr().out
    args = _parser().parse_args(argv)  # the deployment exactly as the command reads it
    policy = load_policy_from_args(args)
    decision = kp.resolve(facts_from_args(args, policy), policy)
    assert out == fmt % ("0.26.0", "sm121", _summary(decision), decision.fingerprint) + "\n"
    assert f"moe={decision.paths['moe'].backend}" in out


def test_summary_of_an_sglang_deployment_is_the_sglang_plugins_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`--engine sglang==X --summary` names SGLang and its release, as the SGLang plugin logs it."""
    plugin = PLUGIN.parents[1] / "sglang" / "plugin.py"
    assert '"kernelpolicy: sglang %s %s %s fingerprint=%s"' in plugin.read_text(encoding="utf-8")
    argv = ["explain", "--gpu", "H100", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--engine", "sglang==0.5.23", "--no-env"]
    assert main([*argv, "--summary"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernelpolicy: sglang 0.5.23 sm90 dense="), out
    assert "vllm" not in out.split("dense=")[0]
