"""Shell completion: the scripts complete subcommands, options and values in real shells, the
values follow the rules and the local Hugging Face cache, and nothing is added to start-up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import _parser, main
from kernelpolicy.tools.completion import hf_cache_models, script, values

BIN = Path(sys.executable).parent
needs_cli = pytest.mark.skipif(not (BIN / "kernelpolicy").exists(), reason="no kernelpolicy script beside python")


def _env(tmp_path: Path) -> dict[str, str]:
    hub = tmp_path / "hub"
    for name in ("models--acme--Tiny-FP8", "models--org--Other", "datasets--x--y"):
        (hub / name).mkdir(parents=True, exist_ok=True)
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HF_HUB_CACHE": str(hub)}


def test_values_follow_the_rules(policy: kp.Policy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpolicy.facts import BACKENDS, FACT_KEYS

    gpus = values("gpus")
    assert {g.name for g in policy.gpus} <= set(gpus) and "sm121" in gpus and "auto" in gpus
    assert {a for g in policy.gpus for a in g.aliases} <= set(gpus)
    assert values("backends") == sorted({b for v in BACKENDS.values() for b in v})
    assert values("facts") == [f"{k}=" for k in sorted(FACT_KEYS)]
    assert values("rules") == sorted(policy.by_id)
    monkeypatch.setenv("HF_HUB_CACHE", _env(tmp_path)["HF_HUB_CACHE"])
    models = values("models")
    assert [m.id for m in policy.models] == models[: len(policy.models)]
    assert models[len(policy.models) :] == ["acme/Tiny-FP8", "org/Other"]


def test_hf_cache_locations(tmp_path: Path) -> None:
    (tmp_path / "hub" / "models--a--b").mkdir(parents=True)
    assert hf_cache_models({"HF_HOME": str(tmp_path)}) == ["a/b"]
    assert hf_cache_models({"HF_HUB_CACHE": str(tmp_path / "missing")}) == []


def test_scripts_name_every_subcommand_and_option() -> None:
    import argparse

    parser = _parser()
    text = script("bash", parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        assert f"{name})" in text or f"'{name}')" in text
        for a in p._actions:
            for o in a.option_strings:
                if o.startswith("--") and a.help != argparse.SUPPRESS:
                    assert o in text, (name, o)
    assert "'vllm venv')" in text and "'check|--format')" in text


def test_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "fish"]) == 0
    assert "complete -c kernelpolicy" in capsys.readouterr().out
    assert main(["completion", "--list", "backends"]) == 0
    assert "triton" in capsys.readouterr().out.split()
    assert main(["completion"]) == 2
    assert main(["completion", "tcsh"]) == 2


def _bash(tmp_path: Path, words: list[str]) -> list[str]:
    script_file = tmp_path / "kp.bash"
    script_file.write_text(script("bash", _parser()), encoding="utf-8")
    arr = " ".join(f"'{w}'" for w in words)
    cmd = (
        f"source {script_file}; COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; _kernelpolicy; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=_env(tmp_path), check=True)
    return [ln for ln in res.stdout.splitlines() if ln]


@needs_cli
def test_bash(tmp_path: Path, policy: kp.Policy) -> None:
    assert _bash(tmp_path, ["kernelpolicy", "ex"]) == ["explain"]
    assert _bash(tmp_path, ["kernelpolicy", "vllm", ""]) == ["audit", "venv"]
    assert _bash(tmp_path, ["kernelpolicy", "check", "--format", ""]) == ["text", "json", "sarif", "github"]
    assert "--summary" in _bash(tmp_path, ["kernelpolicy", "explain", "--s"])
    assert _bash(tmp_path, ["kernelpolicy", "explain", "--gpu", "GB1"]) == ["GB10"]
    assert _bash(tmp_path, ["kernelpolicy", "explain", "--model", "acme/"]) == ["acme/Tiny-FP8"]
    first = policy.models[0].id
    assert first in _bash(tmp_path, ["kernelpolicy", "vllm", "audit", "--model", first[:4]])
    assert _bash(tmp_path, ["kernelpolicy", "explain", "--moe-backend", "trit"]) == ["triton"]
    assert _bash(tmp_path, ["kernelpolicy", "explain", "--fact", "deep_gemm.has_"]) == [
        "deep_gemm.has_sm120_sf_layout="
    ]
    rule = sorted(policy.by_id)[0]
    assert rule in _bash(tmp_path, ["kernelpolicy", "explain", "--allow", rule[:5]])
    assert _bash(tmp_path, ["kernelpolicy", "schema", "de"]) == ["decision"]


@needs_cli
@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh(tmp_path: Path) -> None:
    f = tmp_path / "_kernelpolicy"
    f.write_text(script("zsh", _parser()), encoding="utf-8")
    # ksharrays as bashcompinit's own wrapper sets it; zsh's compadd does the prefix filtering
    cmd = (
        f"source {f}; setopt ksharrays; COMP_WORDS=(kernelpolicy explain --gpu GB1); COMP_CWORD=3; "
        '_kernelpolicy; print -l -- "${COMPREPLY[@]}"'
    )
    res = subprocess.run(["zsh", "-c", cmd], capture_output=True, text=True, env=_env(tmp_path), check=True)
    assert "GB10" in res.stdout.split("\n")


@needs_cli
@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish(tmp_path: Path) -> None:
    f = tmp_path / "kernelpolicy.fish"
    f.write_text(script("fish", _parser()), encoding="utf-8")

    def complete(line: str) -> list[str]:
        res = subprocess.run(
            ["fish", "-c", f"source {f}; complete -C '{line}'"],
            capture_output=True,
            text=True,
            env=_env(tmp_path),
            check=True,
        )
        return [ln.split("\t")[0] for ln in res.stdout.splitlines()]

    assert "explain" in complete("kernelpolicy ex")
    assert complete("kernelpolicy check --format ") == ["github", "json", "sarif", "text"]
    assert "GB10" in complete("kernelpolicy explain --gpu GB1")
    assert "acme/Tiny-FP8" in complete("kernelpolicy explain --model acme/")
    assert "audit" in complete("kernelpolicy vllm ")


def test_no_cost_to_start_up() -> None:
    # (kernelpolicy.tools.schemas is imported for `schema NAME`'s choices: constants only, no models)
    code = (
        "import sys; from kernelpolicy.cli import _parser; _parser(); "
        "print(sorted(m for m in sys.modules if m.startswith('kernelpolicy.') and "
        "m.split('.')[1] in ('completion', '_output_models', 'fmt', 'matrix', 'progress', '_venvs', '_github')))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


@needs_cli
def test_bash_quotes_multi_word_values_and_completes_vllm_spellings(tmp_path: Path, policy: kp.Policy) -> None:
    # `RTX 5090` was inserted as two words; -tp/-q had no values; --engine completed file names
    spaced = sorted({n for g in policy.gpus for n in (g.name, *g.aliases) if " " in n})
    assert spaced, "the catalog has multi-word GPU names"
    got = _bash(tmp_path, ["kernelpolicy", "explain", "--gpu", spaced[0].split()[0]])
    assert spaced[0].replace(" ", "\\ ") in got and spaced[0] not in got
    assert _bash(tmp_path, ["kernelpolicy", "explain", "-tp", ""]) == ["1", "2", "4", "8", "16"]
    assert "fp8" in _bash(tmp_path, ["kernelpolicy", "explain", "-q", ""])
    assert "compressed-tensors" in _bash(tmp_path, ["kernelpolicy", "explain", "--quantization", "comp"])
    (tmp_path / "vllm-notes.txt").write_text("x", encoding="utf-8")
    engines = _bash(tmp_path, ["kernelpolicy", "explain", "--engine", "vllm"])
    assert engines and all(e.startswith("vllm==") for e in engines), engines
    assert "-tp" in _bash(tmp_path, ["kernelpolicy", "explain", "-t"])
    # `test -q` is --quiet, a switch: no quantization methods there
    assert "fp8" not in _bash(tmp_path, ["kernelpolicy", "test", "-q", ""])


def test_fish_names_short_and_old_style_options() -> None:
    text = script("fish", _parser())
    assert "-o tp -x -a '(kernelpolicy completion --list sizes 2>/dev/null)'" in text
    assert "-s q -x -a '(kernelpolicy completion --list quantizations 2>/dev/null)'" in text
    assert "-l engine -x -a '(kernelpolicy completion --list engines 2>/dev/null)'" in text


@needs_cli
def test_bash_completes_an_sglang_line_and_explain_equals(tmp_path: Path) -> None:
    """After `--`, an SGLang line's flags complete their values (sizes, the release's backend
    names), not file names; `--explain=` completes its levels (issue 36)."""
    line = ["kernelpolicy", "explain", "--gpu", "B200", "--", "python", "-m", "sglang.launch_server"]
    assert _bash(tmp_path, [*line, "--tp-size", ""]) == ["1", "2", "4", "8", "16"]
    assert _bash(tmp_path, [*line, "--moe-runner-backend", "flashinfer_t"]) == [
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
    ]
    assert _bash(tmp_path, [*line, "--ep-size", "1"]) == ["1", "16"]
    assert _bash(tmp_path, ["kernelpolicy", "explain", "--explain", "=", "f"]) == ["full"]
    assert _bash(tmp_path, ["kernelpolicy", "explain", "--explain", "="]) == ["notes", "full"]
