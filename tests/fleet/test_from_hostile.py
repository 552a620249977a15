"""Hostile input, round three: `fleet --from` (N4, N5, N6, N15, N16 and the UX round's fleet items).

A file whose facts `explain` rejects is an error naming the file and the fact (never dropped and
decided as `ok`); a machine without a GPU is its row's error and exit 4; files are read with a
bound and their JSON guarded; node ids never collide in the table; control characters in a
file's values do not reach the terminal; the policy is read once for all files.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import main
from kernelpolicy.facts.gpu import facts_from_spec

MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`kernelpolicy facts --json` of this machine (once for the module)."""
    res = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", "facts", "--json", "--no-cache"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def _file(tmp_path: Path, base: dict[str, Any], name: str, facts: dict[str, Any], **top: Any) -> Path:
    data = copy.deepcopy(base)
    data["facts"] = {k: v for k, v in data["facts"].items() if not k.startswith("gpu.")} | facts
    data.update(top)
    p = tmp_path / name
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def _gb10(policy: kp.Policy) -> dict[str, Any]:
    return dict(facts_from_spec("GB10", policy.gpus))


@pytest.mark.parametrize(("key", "value"), [("gpu.sm", "sm999"), ("gpu.sm", None), ("gpu.count", -1), ("gpu.sm", 5)])
def test_a_fact_explain_rejects_is_an_error_naming_file_and_fact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy, key: str, value: Any
) -> None:
    bad = _file(tmp_path, base, "bad.json", {**_gb10(policy), key: value})
    assert main(["fleet", "--model", MODEL, "--from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"`{bad}`" in err and key in err


def test_an_unknown_fact_key_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy
) -> None:
    bad = _file(tmp_path, base, "bad.json", {**_gb10(policy), "gpu.smm": "sm121"})
    assert main(["fleet", "--model", MODEL, "--from", str(bad)]) == 2
    assert "gpu.smm" in capsys.readouterr().err


def test_a_machine_without_a_gpu_is_no_decision_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy
) -> None:
    bare = _file(tmp_path, base, "bare.json", {}, gpu=None, gpu_reason="NVML library not found")
    good = _file(tmp_path, base, "spark.json", _gb10(policy))
    assert main(["fleet", "--model", MODEL, "--json", "--from", str(bare), str(good)]) == 4
    report = json.loads(capsys.readouterr().out)
    row = next(n for n in report["nodes"] if n["id"] == str(bare))
    assert row["status"] == "error" and "no NVIDIA GPU" in row["reason"] and "NVML library not found" in row["reason"]
    assert main(["fleet", "--model", MODEL, "--from", str(bare)]) == 4
    out = capsys.readouterr().out
    assert "error: no NVIDIA GPU" in out and "(exit 4)" in out


def test_node_ids_never_collide(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy
) -> None:
    a = _file(tmp_path, base, "rack-0001-node-a.json", _gb10(policy))
    b = _file(tmp_path, base, "rack-0001-node-b.json", dict(facts_from_spec("H200", policy.gpus)))
    assert main(["fleet", "--model", MODEL, "--from", str(a), str(b)]) == 0  # two GPU classes, each agrees
    out = capsys.readouterr().out
    rows = [ln.split()[0] for ln in out.splitlines()[3:5]]
    assert len(set(rows)) == 2, out
    group_lines = [ln for ln in out.splitlines() if ln.startswith(("  A ", "  B "))]
    assert any("node-a" in ln for ln in group_lines) and any("node-b" in ln for ln in group_lines)


def test_control_characters_do_not_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy
) -> None:
    f = _file(tmp_path, base, "esc.json", {**_gb10(policy), "driver.version": "580\x1b[2J\n result ok"})
    code = main(["fleet", "--model", MODEL, "--from", str(f)])
    out = capsys.readouterr().out + capsys.readouterr().err
    assert "\x1b" not in out
    assert code in (0, 2)


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "kernelpolicy", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    for path, reason in ((fifo, "FIFO"), (Path("/dev/zero"), "device")):
        res = _run("fleet", "--model", MODEL, "--from", str(path))
        assert res.returncode == 2 and reason in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"schema": "kernelpolicy.machine/1", "facts": {"gpu.count": ' + "9" * 5000 + "}}", "number too large"),
        ("x" * 5_000_000, "larger than"),
    ],
)
def test_json_outside_the_guards_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    f = tmp_path / "f.json"
    f.write_text(content, encoding="utf-8")
    assert main(["fleet", "--model", MODEL, "--from", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "internal error" not in err


def test_the_policy_and_the_model_are_read_once_for_all_files(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base: dict[str, Any],
    policy: kp.Policy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelpolicy.dsl import loader

    files = [str(_file(tmp_path, base, f"n{i}.json", _gb10(policy))) for i in range(20)]
    calls: list[int] = []
    real = loader.load_policy

    def counting(*a: Any, **k: Any) -> kp.Policy:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(loader, "load_policy", counting)
    assert main(["fleet", "--model", MODEL, "--from", *files]) == 0
    assert len(calls) <= 2, len(calls)  # (the forwarded environment reads it once too)


# -- round four, R7: a choice the node refuses, and deployment facts in a node's file ------------

DSV3 = "deepseek-ai/DeepSeek-V3"


@pytest.mark.parametrize(
    ("option", "source"),
    [("--fact=deploy.moe_backend=deep_gemm", "--moe-backend deep_gemm"), ("--env=VLLM_USE_DEEP_GEMM=1", "VLLM_USE_")],
)
def test_a_choice_the_node_refuses_is_not_ok(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base: dict[str, Any],
    policy: kp.Policy,
    option: str,
    source: str,
) -> None:
    """GB10 refuses DeepGEMM for DeepSeek-V3: `explain` exits 5, so does `fleet` (it said `ok`, exit 0)."""
    node = _file(tmp_path, base, "gb10.json", _gb10(policy))
    assert main(["explain", "--gpu", "GB10", "--model", DSV3, "--no-env", option]) == 5
    capsys.readouterr()
    assert main(["fleet", "--model", DSV3, "--from", str(node), option]) == 5
    out = capsys.readouterr().out
    row = out.splitlines()[3]
    assert "refused: `" + source in row and " ok" not in row, out
    assert "an explicit choice was refused on 1 node(s)" in out and "(exit 5)" in out
    assert main(["fleet", "--model", DSV3, "--json", "--from", str(node), option]) == 5
    report = json.loads(capsys.readouterr().out)
    assert report["exit"] == 5 and report["nodes"][0]["decision"]["refused"]


def test_a_choice_the_node_takes_is_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy
) -> None:
    node = _file(tmp_path, base, "gb10.json", _gb10(policy))
    assert main(["fleet", "--model", DSV3, "--from", str(node), "--fact", "deploy.moe_backend=triton"]) == 0
    assert "refused" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("deploy.moe_backend", "deep_gemm"),
        ("deploy.linear_backend", "cutlass"),
        ("deploy.allow_rules", ["deep_gemm-no-sm120-sf-layout"]),
        ("deploy.env.VLLM_USE_DEEP_GEMM", "1"),
        ("deploy.tp", 8),
    ],
)
def test_a_node_file_may_not_carry_the_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy, key: str, value: Any
) -> None:
    """It was accepted and used: `dense=cutlass [--linear-backend cutlass]`, a flag nobody passed."""
    node = _file(tmp_path, base, "gb10.json", {**_gb10(policy), key: value})
    assert main(["fleet", "--model", DSV3, "--from", str(node)]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and f"`{node}`" in err and f"`{key}`" in err and "--fact" in err, err
    assert captured.out == ""


def test_a_gpu_block_that_contradicts_the_facts_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy
) -> None:
    """An H200 `gpu` block over GB10 facts was shown as H200 and decided as GB10."""
    h200 = {"name": "NVIDIA H200", "sm": "sm90", "cc": "9.0", "count": 8, "source": "nvml"}
    node = _file(tmp_path, base, "gb10.json", _gb10(policy), gpu=h200)
    assert main(["fleet", "--model", DSV3, "--json", "--from", str(node)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "`gpu` block" in err and "gpu.name" in err, err
    same = {**h200, "name": _gb10(policy)["gpu.name"], "sm": "sm121", "cc": "12.1", "count": 1}
    node = _file(tmp_path, base, "gb10.json", _gb10(policy), gpu=same)
    assert main(["fleet", "--model", DSV3, "--json", "--from", str(node)]) == 0


def test_a_node_whose_host_contradicts_its_gpu_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], policy: kp.Policy
) -> None:
    """GB10 facts with `host.machine: x86_64` were accepted (a GB10 is on a Grace CPU, aarch64)."""
    node = _file(tmp_path, base, "gb10.json", {**_gb10(policy), "host.machine": "x86_64"})
    assert main(["fleet", "--model", DSV3, "--from", str(node)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "`host.machine` `x86_64` contradicts" in err and "aarch64" in err
    h200 = _file(tmp_path, base, "h200.json", {**facts_from_spec("H200", policy.gpus), "host.machine": "aarch64"})
    assert main(["fleet", "--model", DSV3, "--from", str(h200)]) == 0  # an H200 comes on either host
