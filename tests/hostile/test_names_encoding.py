"""Round four, R3: file names that are not UTF-8, and output in an encoding that lacks a
character. A policy named ``pol\\xff.yaml`` loads in every command and in the API (it was an
internal ``UnicodeEncodeError`` in every locale, and the vLLM plugin then left vLLM's choice in
place); under ``PYTHONIOENCODING=ascii`` a character the encoding lacks is printed as an escape
(it was an internal error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import SRC, cli_subprocess

M = ["--gpu", "GB10", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"]  # dense runs cutlass there unless a rule says no
#: A rule whose effect shows: DeepSeek-V3 on GB10 decides dense cutlass without it.
RULE = (
    "rules:\n"
    "  - id: no-cutlass-here\n"
    "    when: {gpu.sm: sm121}\n"
    "    paths: [dense]\n"
    "    deny: cutlass\n"
    "    severity: perf\n"
    "    because: the operator says so\n"
)
#: ``pol\xff.yaml``: the byte 0xff is not UTF-8 (Python holds it as the surrogate U+DCFF).
NAME = os.fsdecode(b"pol\xff.yaml")
LOCALES = ["C.UTF-8", "C", "POSIX", ""]


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / NAME
    path.write_text(RULE, encoding="utf-8")
    return path


def _run(*argv: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m kernelpolicy`` with *env* over the test's environment, output as bytes decoded
    leniently (what the terminal would show), the locale's own encoding in the child."""
    full = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", **env}
    for key in ("LC_ALL", "LANG", "LC_CTYPE"):
        if env.get(key) == "":
            full.pop(key, None)
    run = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", *argv], check=False, capture_output=True, timeout=120, env=full, cwd=cwd
    )
    return subprocess.CompletedProcess(
        run.args, run.returncode, run.stdout.decode("utf-8", "replace"), run.stderr.decode("utf-8", "replace")
    )


@pytest.mark.parametrize("locale", LOCALES)
def test_explain_with_a_policy_whose_name_is_not_utf8(policy: Path, locale: str) -> None:
    run = _run("explain", *M, "--policy", str(policy), "--explain=full", env={"LC_ALL": locale})
    assert "internal error" not in run.stderr and run.returncode == 0, run.stderr
    assert "no-cutlass-here" in run.stdout
    assert "pol\\xff.yaml" in run.stdout  # the rule's place, the byte shown as ls -b shows it


@pytest.mark.parametrize("locale", LOCALES)
def test_policy_from_the_environment_whose_name_is_not_utf8(policy: Path, locale: str) -> None:
    run = _run("explain", *M, "--json", env={"LC_ALL": locale, "KERNELPOLICY_POLICY": str(policy)})
    assert "internal error" not in run.stderr and run.returncode == 0, run.stderr
    dense = json.loads(run.stdout)["paths"]["dense"]
    assert dense["backend"] != "cutlass" and "no-cutlass-here" in run.stdout


@pytest.mark.parametrize("locale", LOCALES)
def test_check_of_a_file_whose_name_is_not_utf8(policy: Path, locale: str) -> None:
    run = _run("check", "--bare", "--no-coverage", str(policy), env={"LC_ALL": locale})
    assert "internal error" not in run.stderr and run.returncode == 1, run.stderr
    assert "pol\\xff.yaml:5:11" in run.stdout  # the finding's place, the byte shown as ls -b shows it
    for fmt in ("json", "sarif"):
        run = _run("check", "--bare", "--no-coverage", "--format", fmt, str(policy), env={"LC_ALL": locale})
        assert "internal error" not in run.stderr and run.returncode == 1, run.stderr
        assert json.loads(run.stdout)


def test_the_api_loads_a_policy_whose_name_is_not_utf8(policy: Path) -> None:
    import kernelpolicy as kp

    loaded = kp.load_policy(str(policy), environ=False)
    (rule,) = [r for r in loaded.rules if r.id == "no-cutlass-here"]
    assert rule.origin is not None and rule.origin.file.endswith("pol\\xff.yaml")


def test_the_vllm_plugin_loads_a_policy_whose_name_is_not_utf8(policy: Path) -> None:
    """The plugin's rule tables (it failed open: `could not load the rule tables ...
    (UnicodeEncodeError); leaving vLLM's own choice in place`)."""
    code = (
        "from kernelpolicy.engines.vllm import plugin\n"
        "policy = plugin._STATE.policy()\n"
        "print(any(r.id == 'no-cutlass-here' for r in policy.rules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "KERNELPOLICY_POLICY": str(policy), "LC_ALL": "C.UTF-8"}
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_model_folder_with_accents_printed_in_ascii(tmp_path: Path, encoding: str) -> None:
    model = tmp_path / "modèle-é€"
    model.mkdir()
    (model / "config.json").write_text(
        '{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, '
        '"num_hidden_layers": 2, "torch_dtype": "bfloat16"}'
    )
    run = _run("explain", "--gpu", "H100", "--model", str(model), env={"PYTHONIOENCODING": encoding})
    assert run.returncode == 0, run.stderr
    assert "internal error" not in run.stderr
    assert "\\u20ac" in run.stdout  # the euro sign, which neither encoding has


def test_fmt_and_test_of_a_name_that_is_not_utf8_printed_in_ascii(tmp_path: Path) -> None:
    bad = tmp_path / NAME
    bad.write_text("rules: [ ]\nimplies: []\n")
    run = _run("fmt", "--check", str(bad), env={"PYTHONIOENCODING": "ascii"})
    assert run.returncode == 1 and "internal error" not in run.stderr, run.stderr
    assert "pol\\xff.yaml" in run.stdout
    case = tmp_path / os.fsdecode(b"case\xff.yaml")
    case.write_text(
        "name: caf\u00e9 on Hopper\ngiven: {gpu: H100, model: openai/gpt-oss-20b}\nexpect: {moe: flashinfer_cutlass}\n"
    )
    run = _run("test", str(case), env={"PYTHONIOENCODING": "ascii"})
    assert run.returncode == 0 and "internal error" not in run.stderr, run.stderr
    assert "caf\\xe9" in run.stdout and "case\\xff.yaml" in run.stdout


def test_an_error_naming_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / os.fsdecode(b"gone\xff.yaml")
    run = cli_subprocess("explain", *M, "--policy", str(missing))
    assert run.returncode == 2
    assert "gone\\xff.yaml" in run.stderr and "internal error" not in run.stderr
