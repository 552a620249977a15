"""The environment reports engine issues carry, read as machine facts (issue 36):
``vllm collect-env`` in its plain and sectioned forms and ``python3 -m sglang.check_env``, and
``explain --from-env-report FILE`` deciding for the reported machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpolicy.cli import main
from kernelpolicy.facts.env_report import ReportError, read_env_report

DATA = Path(__file__).parent / "data" / "env_reports"
MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"


def test_the_sectioned_collect_env() -> None:
    r = read_env_report((DATA / "vllm-collect-env-sectioned.txt").read_text(encoding="utf-8"))
    assert r.kind == "vllm collect-env" and r.engine == "vllm" and r.gpu == "NVIDIA GB10"
    assert dict(r.values) == {
        "torch.version": "2.9.1",
        "cuda.version": "12.8",
        "driver.version": "580.95.05",
        "flashinfer.version": "0.6.6",
        "triton.version": "3.5.1",
        "vllm.version": "0.26.0",
        "gpu.count": 1,
    }
    assert dict(r.env) == {"VLLM_USE_DEEP_GEMM": "1", "NCCL_CUMEM_ENABLE": "0"}


def test_the_plain_collect_env_with_four_gpus() -> None:
    r = read_env_report((DATA / "vllm-collect-env-plain.txt").read_text(encoding="utf-8"))
    assert r.gpu == "NVIDIA H100 80GB HBM3" and r.values["gpu.count"] == 4
    assert r.values["vllm.version"] == "0.24.0" and r.values["driver.version"] == "550.54.14"
    assert r.values["torch.version"] == "2.5.1" and r.values["cuda.version"] == "12.4"


def test_sglang_check_env() -> None:
    r = read_env_report((DATA / "sglang-check-env.txt").read_text(encoding="utf-8"))
    assert r.kind == "sglang check_env" and r.engine == "sglang" and r.gpu == "NVIDIA B200"
    assert r.values["gpu.count"] == 8 and r.values["gpu.cc"] == "10.0"
    assert r.values["nvcc.version"] == "12.9.86" and r.values["cuda.version"] == "12.9"
    assert r.values["sglang.version"] == "0.5.23" and r.values["flashinfer.version"] == "0.7.2"
    assert "vllm.version" not in r.values and "flashinfer_jit_cache.version" not in r.values  # "Module Not Found"


def test_text_that_is_no_report_is_refused() -> None:
    with pytest.raises(ReportError, match="not a report kernelpolicy reads"):
        read_env_report("hello\nworld\n")


def test_explain_decides_for_the_reported_machine(capsys: pytest.CaptureFixture[str]) -> None:
    """The GPU, the vLLM release and the deployment's VLLM_USE_DEEP_GEMM=1 come from the report:
    the decision is the one `--gpu GB10 --engine vllm==0.26.0 --env VLLM_USE_DEEP_GEMM=1` gives."""
    report = str(DATA / "vllm-collect-env-sectioned.txt")
    assert main(["explain", "--from-env-report", report, "--model", MODEL, "--no-env", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["facts"]["gpu.sm"] == "sm121" and got["facts"]["vllm.version"] == "0.26.0"
    assert got["sources"]["vllm.version"] == "report" and got["sources"]["driver.version"] == "report"
    assert got["paths"]["moe"]["explicit"] == "VLLM_USE_DEEP_GEMM=1"
    argv = ["--gpu", "GB10", "--engine", "vllm==0.26.0", "--env", "VLLM_USE_DEEP_GEMM=1"]
    facts = [
        "--fact",
        "driver.version=580.95.05",
        "--fact",
        "flashinfer.version=0.6.6",
        "--fact",
        "torch.version=2.9.1",
    ]
    facts += ["--fact", "triton.version=3.5.1", "--fact", "cuda.version=12.8", "--fact", "gpu.count=1"]
    assert main(["explain", *argv, *facts, "--model", MODEL, "--no-env", "--json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["paths"] == got["paths"]


def test_the_options_win_over_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    report = str(DATA / "vllm-collect-env-sectioned.txt")
    argv = ["explain", "--from-env-report", report, "--gpu", "H100", "--model", MODEL, "--no-env", "--json"]
    assert main([*argv, "--env", "VLLM_USE_DEEP_GEMM=0"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["facts"]["gpu.sm"] == "sm90" and got["paths"]["moe"]["backend"] != "deep_gemm"


def test_a_bad_report_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "r.txt"
    bad.write_text("not a report\n", encoding="utf-8")
    assert main(["explain", "--from-env-report", str(bad), "--model", MODEL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--from-env-report `{bad}`: not a report kernelpolicy reads" in err[0]
    assert main(["explain", "--model", MODEL]) == 2
    assert "no GPU given" in capsys.readouterr().err


def test_fleet_reads_reports_beside_facts_files(capsys: pytest.CaptureFixture[str]) -> None:
    """`fleet --from` takes the reports engine issues carry: each is a node of its GPU's class."""
    files = [str(DATA / "sglang-check-env.txt"), str(DATA / "vllm-collect-env-plain.txt")]
    assert main(["fleet", "--from", *files, "--model", MODEL, "--json"]) == 0
    nodes = {n["id"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    b200, h100 = nodes[files[0]], nodes[files[1]]
    assert b200["facts"]["gpu.sm"] == "sm100" and b200["facts"]["gpu.count"] == 8
    assert h100["facts"]["gpu.sm"] == "sm90" and h100["facts"]["vllm.version"] == "0.24.0"


def test_an_h20_is_not_an_h200(capsys: pytest.CaptureFixture[str]) -> None:
    """Reports of H20 machines are common; the catalog took `H20` as an alias of the H200."""
    assert main(["explain", "--gpu", "NVIDIA H20", "--model", MODEL, "--no-env", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["facts"]
    assert facts["gpu.name"] == "NVIDIA H20" and facts["gpu.sm"] == "sm90"
