"""Golden policy cases (tests/cases/*.yaml), one parametrized test, and the runner itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpolicy.analysis.cases import find_cases, run_case
from kernelpolicy.cli import main

CASES = find_cases([Path(__file__).parent / "cases"])
_POLICIES: dict[tuple[str, ...], object] = {}


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_golden_case(case: Path) -> None:
    result = run_case(case, _POLICIES)  # type: ignore[arg-type]
    assert result.error is None, result.error
    assert result.failures == (), "\n".join(result.failures)


def test_seed_cases_are_present() -> None:
    assert {"seed-1-qwen36-moe-gb10", "seed-2-deepseek-v4-router-gb10", "seed-3-gemma4-sm120-no-sf-layout"} <= {
        c.stem for c in CASES
    }


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "case.yaml"
    p.write_text(text)
    return p


def test_failure_reads_as_a_diff(tmp_path: Path) -> None:
    case = write(
        tmp_path,
        "given: {gpu: sm121, model: Qwen/Qwen3.6-35B-A3B-FP8}\n"
        "expect: {moe: deep_gemm, warmup: [deep_gemm.moe], rules: {moe: [nope]}, warnings: [zzz]}\n",
    )
    r = run_case(case)
    assert not r.ok
    assert r.failures[0] == "moe: expected `deep_gemm`, got `triton` (decided by deep_gemm-e8m0-qwen3_5)"
    assert r.failures[1] == "warmup: expected ['deep_gemm.moe'], got []"
    assert r.failures[2].startswith("moe: expected rule(s) ['nope'] among the deciding rules")
    assert r.failures[3].startswith("warnings: none contains `zzz`")


def test_expected_error_that_does_not_come(tmp_path: Path) -> None:
    case = write(tmp_path, "given: {gpu: sm121, model: Qwen/Qwen3.6-35B-A3B-FP8}\nexpect: {error: boom}\n")
    assert run_case(case).failures == ("expected an error containing `boom`, got a decision",)


def test_broken_case_file(tmp_path: Path) -> None:
    r = run_case(write(tmp_path, "given: {gpu: sm121}\nexpect: {moee: triton}\n"))
    assert r.error is not None and "unknown case field(s): `expect.moee`" in r.error
    r = run_case(write(tmp_path, "given: [\n"))
    assert r.error is not None and "invalid YAML" in r.error


def test_a_case_that_expects_nothing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`expect: {}` would pass whatever is decided: refused, one line naming the file."""
    case = write(tmp_path, "given: {gpu: sm121, model: Qwen/Qwen3.6-35B-A3B-FP8}\nexpect: {}\n")
    r = run_case(case)
    assert r.error is not None and "`expect` is empty" in r.error
    assert main(["test", str(case)]) != 0
    err = capsys.readouterr()
    assert "`expect` is empty" in err.out + err.err and "Traceback" not in err.err


def test_unknown_model_in_a_case_is_a_failure(tmp_path: Path) -> None:
    r = run_case(write(tmp_path, "given: {gpu: sm121, model: no/such}\nexpect: {dense: cutlass}\n"))
    assert r.failures and "unknown model `no/such`" in r.failures[0]


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = Path(__file__).parent / "cases" / "seed-1-qwen36-moe-gb10.yaml"
    assert main(["test", str(good)]) == 0
    assert capsys.readouterr().out.strip().endswith("1 passed, 0 failed")
    bad = write(tmp_path, "given: {gpu: sm121, model: Qwen/Qwen3.6-35B-A3B-FP8}\nexpect: {moe: marlin}\n")
    assert main(["test", "-q", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert (
        "FAIL" in out and "moe: expected `marlin`, got `triton`" in out and out.strip().endswith("1 passed, 1 failed")
    )
    assert main(["test", str(tmp_path / "missing.yaml")]) == 2


# -- issue 36: rule coverage, a run-level policy, cases written as launch lines -----------------


def test_coverage_names_the_rules_no_case_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`test --coverage` (as `opa test --coverage`): the rules some case's decision read, counted,
    and those none did, named; a rule the one case exercises is not among them."""
    case = tmp_path / "gb10.yaml"
    case.write_text("given: {gpu: sm121, model: Qwen/Qwen3.6-35B-A3B-FP8}\nexpect: {moe: triton}\n", encoding="utf-8")
    assert main(["test", str(case), "--coverage", "-q"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("coverage: "))
    read, total = (int(n) for n in line.split()[1:4:2])
    assert 0 < read < total
    unread = next(x for x in out.splitlines() if x.startswith("not read by any case: "))
    assert "deep_gemm-no-sm120-sf-layout" not in unread  # GB10 rejects DeepGEMM by this rule
    assert "flashinfer_b12x-nvfp4-512-experts-ima" in unread


def test_a_run_level_policy_applies_to_every_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = tmp_path / "gb10.yaml"
    case.write_text("given: {gpu: sm121, model: Qwen/Qwen3.6-35B-A3B-FP8}\nexpect: {moe: triton}\n", encoding="utf-8")
    acme = tmp_path / "acme.yaml"
    acme.write_text(
        "rules:\n  - id: acme-no-triton-moe\n    paths: [moe]\n    deny: triton\n    severity: perf\n"
        "    because: acme measured it slower\n",
        encoding="utf-8",
    )
    assert main(["test", str(case)]) == 0
    capsys.readouterr()
    assert main(["test", str(case), "--policy", str(acme)]) == 1
    assert "moe: expected `triton`" in capsys.readouterr().out


def test_a_case_written_as_a_launch_line_decides_as_explain_of_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`given.serve` goes through the command line's fact assembly: SGLang's `--tp 8` is TP 8."""
    case = tmp_path / "line.yaml"
    line = "python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3 --tp 8"
    case.write_text(f"given: {{gpu: B200, serve: '{line}'}}\nexpect: {{moe: triton}}\n", encoding="utf-8")
    assert main(["test", str(case)]) == 0
    capsys.readouterr()
    assert main(["explain", "--gpu", "B200", "--json", "--no-env", "--", *line.split()]) == 0
    assert json.loads(capsys.readouterr().out)["paths"]["moe"]["backend"] == "triton"
    broken = tmp_path / "broken.yaml"
    broken.write_text("given: {gpu: B200, serve: ''}\nexpect: {moe: triton}\n", encoding="utf-8")
    assert main(["test", str(broken)]) == 1
    assert "`given.serve` must be a launch line" in capsys.readouterr().out
