"""``kernelpolicy vllm audit`` against real vLLM 0.26.0 and 0.34.0 on a simulated GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.cli import main

pytestmark = pytest.mark.vllm

QWEN = "Qwen/Qwen3.6-35B-A3B-FP8"
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def audit(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], simulate_cached: Any, venv: Any) -> Any:
    """Run the audit in this process; identical vLLM probes are shared across the session."""
    monkeypatch.setattr("kernelpolicy.engines.vllm.testing.simulate", simulate_cached)

    def go(version: str, *extra: str, as_json: bool = True) -> tuple[int, Any, str]:
        argv = ["vllm", "audit", "--gpu", "sm121", "--model", QWEN, "--python", str(venv(version)), *extra]
        code = main(argv + (["--json"] if as_json else []))
        out, err = capsys.readouterr()
        return code, (json.loads(out) if as_json and out.strip() else out), err

    return go


def _schema_errors(report: Any) -> list[str]:
    """What `kernelpolicy schema vllm-audit` says is wrong with *report* (nothing, it must be)."""
    jsonschema = pytest.importorskip("jsonschema")
    from kernelpolicy.tools.schemas import generate

    validator = jsonschema.Draft202012Validator(generate("vllm-audit"))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(report)]


def test_026_audit_flags_the_seed_bug(audit: Any) -> None:
    code, report, err = audit("0.26.0")
    assert code == 1, err
    assert _schema_errors(report) == []
    assert report["vllm"]["version"] == "0.26.0"
    assert report["paths"]["dense"] == {**report["paths"]["dense"], "vllm": "cutlass", "kernelpolicy": "cutlass"}
    assert report["paths"]["moe"]["vllm"] == "deep_gemm" and report["paths"]["moe"]["kernelpolicy"] == "triton"
    assert report["paths"]["moe"]["kind"] == "conflict"
    assert "deep_gemm-e8m0-qwen3_5" in report["paths"]["moe"]["reason"]
    assert report["paths"]["warmup"]["vllm"] == "deep_gemm.moe" and report["paths"]["warmup"]["kernelpolicy"] == ""
    assert any("moe runs DEEPGEMM" in d for d in report["divergences"])
    assert "qwen3_5_moe_text" in (report["auto_disable_warning"] or "")
    # the text form says the same, with the flags that reproduce kernelpolicy's choice
    code, text, _ = audit("0.26.0", as_json=False)
    assert code == 1
    assert "divergences (vLLM's paths disagree with each other):" in text
    assert "moe runs DEEPGEMM" in text
    assert "VLLM_USE_DEEP_GEMM=0 vllm serve Qwen/Qwen3.6-35B-A3B-FP8 --moe-backend triton" in text
    assert "(exit 1)" in text


def test_026_audit_with_plugin_is_consistent(audit: Any) -> None:
    code, report, err = audit("0.26.0", "--plugin")
    assert code == 0, json.dumps(report, indent=1) + err
    assert _schema_errors(report) == []
    assert report["plugin"] == {"enabled": True, "registered": True, "warnings": [], "fallbacks": [], "conflicts": []}
    assert report["divergences"] == [] and report["differences"] == []
    assert {p: row["vllm"] for p, row in report["paths"].items()} == {
        "dense": "cutlass",
        "moe": "triton",
        "router": report["paths"]["router"]["kernelpolicy"],
        "attention": report["paths"]["attention"]["kernelpolicy"],  # vLLM's selector runs the decided backend
        "warmup": "",
    }
    assert report["paths"]["attention"]["kernelpolicy"] is not None


def test_034_audit_flags_the_explicit_deep_gemm_divergence(audit: Any) -> None:
    code, report, err = audit("0.34.0", "--env", "VLLM_USE_DEEP_GEMM=1")
    assert code == 1, err
    assert report["vllm"]["version"] == "0.34.0"
    assert report["env"] == {"VLLM_USE_DEEP_GEMM": "1"}
    assert report["paths"]["dense"]["vllm"] == "cutlass"
    assert report["paths"]["moe"]["vllm"] == "deep_gemm"
    assert any("moe runs DEEPGEMM" in d for d in report["divergences"])


def test_034_audit_with_plugin_shows_no_divergence(audit: Any) -> None:
    code, report, err = audit("0.34.0", "--env", "VLLM_USE_DEEP_GEMM=1", "--plugin")
    assert code == 0, json.dumps(report, indent=1) + err
    assert report["divergences"] == []
    assert report["paths"]["dense"]["vllm"] == report["paths"]["moe"]["vllm"] == "deep_gemm"


def test_audit_without_the_venv_is_one_line_with_the_build_hint(tmp_path: Path) -> None:
    env = {**os.environ, "KERNELPOLICY_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", "vllm", "audit", "--gpu", "sm121", "--model", QWEN, "--vllm", "0.26.0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "no vLLM `0.26.0` venv" in lines[0] and "kernelpolicy vllm venv 0.26.0" in lines[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model-type", "qwen3_5_moe_text", "--quant", "fp8_block"], "needs --model"),
        (["--model", "nobody/nothing"], "unknown model `nobody/nothing`"),
        (["--model", QWEN, "--python", "/nonexistent/python"], "`/nonexistent/python`: no such file"),
    ],
)
def test_audit_bad_input_exits_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra = [] if "--python" in argv else ["--python", sys.executable]
    code = main(["vllm", "audit", "--gpu", "sm121", *argv, *extra])
    _, err = capsys.readouterr()
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
