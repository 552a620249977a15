"""`kernelpolicy bench` on a machine without a GPU: the plan, the errors, and the H200 reports."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kernelpolicy.bench import Report, render_text
from kernelpolicy.cli import main
from kernelpolicy.tools.schemas import generate

MEASURED = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "2026-12-04-h200-bench"


def test_plan_lists_the_shapes_per_rank_and_the_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--plan", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B-FP8", "-tp", "2", "-ep"]) == 0
    out = capsys.readouterr().out
    assert (
        "qkv_proj (2560x2048)" in out
        and "experts (64x1536x2048 + 64x2048x768, top-8)  [64 of 128 experts per rank (EP 2)]" in out
    )
    assert "dense   decision flashinfer_deep_gemm; candidates flashinfer_deep_gemm, deep_gemm, cutlass" in out


def test_all_lists_the_ruled_out_candidates_with_their_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--plan", "--all", "--model", "deepseek-ai/DeepSeek-V3", "--paths", "dense"]) == 0
    assert "b12x (ruled out by catalog.dense.b12x)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--paths", "dense,mlp"], "--paths `dense,mlp`: expected some of dense, moe, router, attention"),
        (["--m", "1,zero"], "--m `1,zero`: expected comma-separated positive integers"),
        (["--only", "nope"], "--only `nope`: none of these is a candidate here"),
        (["--report", "/no/such.json"], "`/no/such.json`: cannot be read"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--model", "Qwen/Qwen3-32B-FP8", "--gpu", "H200", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_without_torch_or_a_gpu_bench_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("yaml")
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    except ImportError:
        pass
    assert main(["bench", "--model", "Qwen/Qwen3-32B-FP8", "--gpu", "H200", "--m", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelpolicy: ") and ("PyTorch" in err or "CUDA GPU" in err) and err.count("\n") == 1


def test_a_report_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"schema": "kernelpolicy.bench/1", "model": "m"}))
    assert main(["bench", "--report", str(bad)]) == 2
    assert "not a bench report: missing `candidates`" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["DeepSeek-V3-attn", "DeepSeek-V3-mlp", "Qwen3-32B-FP8", "Qwen3-30B-A3B-FP8"])
def test_the_h200_reports_match_the_schema_and_render(name: str) -> None:
    data = json.loads((MEASURED / f"{name}.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(generate("bench")).iter_errors(data)]
    assert errors == []
    report = Report.from_json(data)
    assert report.to_json()["cells"] == data["cells"]
    # the decision's choice never failed there; torch's bare cuBLASLt call refused M = 1 on every shape
    assert not any(c["choice_failed"] for c in data["cells"])
    torch_m1 = [f for f in data["failures"] if f["backend"] == "torch"]
    assert {f["m"] for f in torch_m1} == {1} and all(f["contradicts_shipped"] for f in torch_m1)
    assert "CUBLAS_STATUS_NOT_SUPPORTED" in render_text(report)


def test_vllm_pads_torch_block_fp8_and_the_bare_call_refuses_m_not_a_multiple_of_4() -> None:
    padded = json.loads((MEASURED / "Qwen3-32B-FP8.padded.json").read_text())
    assert padded["failures"] == [] and {c["m"] for c in padded["cells"]} == {1, 2, 3, 4, 5, 16}
    bare = json.loads((MEASURED / "Qwen3-30B-A3B-FP8.torch-bare.json").read_text())
    refused = {f["m"] for f in bare["failures"]}
    ran = {c["m"] for c in bare["cells"]} - refused
    assert refused == {1, 2, 3, 5} and ran == {4, 8, 12, 16}


def test_the_emitted_policy_is_proved_by_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "measured.yaml"
    code = main(["bench", "--report", str(MEASURED / "Qwen3-32B-FP8.json"), "--emit-policy", str(policy)])
    assert code == 0  # re-rendering measures nothing (issue #36); the failure still becomes a rule below
    capsys.readouterr()
    assert main(["check", "--no-coverage", str(policy)]) == 0
    capsys.readouterr()
    assert main(["explain", "--gpu", "H200", "--model", "Qwen/Qwen3-32B-FP8", "--policy", str(policy),
                 "--linear-backend", "torch", "--fact", "cuda.version=13.0", "--json"]) == 5  # fmt: skip
    # exit 5: the explicit choice is refused (by the measured rule), as the decision says
    decision = json.loads(capsys.readouterr().out)
    assert decision["paths"]["dense"]["backend"] != "torch" and decision["paths"]["dense"]["explicit_refused"]
    torch = next(c for c in decision["paths"]["dense"]["candidates"] if c["backend"] == "torch")
    assert "bench-sm90-torch-dense-raised" in torch["rules"]


REMEASURED = MEASURED.parent / "2026-12-05-h200-bench"


@pytest.mark.parametrize("name", ["DeepSeek-V3-attn", "Qwen3-32B-FP8", "Qwen3-30B-A3B-FP8-moe"])
def test_the_2026_12_05_reports_match_the_schema_and_say_how_each_cell_was_timed(name: str) -> None:
    data = json.loads((REMEASURED / "all" / f"{name}.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(generate("bench")).iter_errors(data)]
    assert errors == [] and data["protocol"]["processes"] >= 3
    assert {c["m"]: c["mode"] for c in data["cells"]} == {
        1: "graph",
        16: "graph",
        128: "graph",
        1024: "eager",
        4096: "eager",
    }
    again = Report.from_json(data).to_json()["cells"]
    for mine, theirs in zip(again, data["cells"], strict=True):  # the loss is recomputed from rounded times
        assert mine.pop("loss") == pytest.approx(theirs.pop("loss"), abs=2e-4) and mine == theirs


def test_the_kv_b_proj_loss_of_2026_12_04_is_not_one_under_the_engines_timing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = [str(REMEASURED / d / f"DeepSeek-V3-attn.p{i}.json") for d in ("call12", "call3") for i in (1, 2)]
    assert main(["bench", "--report", p[0], "--report", p[1], "--report", p[2], "--report", p[3], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (cell,) = [c for c in data["cells"] if c["layer"] == "kv_b_proj" and c["m"] == 128]
    us = {o["backend"]: o["us"] for o in cell["outcomes"] if o["status"] == "ok"}
    assert cell["mode"] == "graph" and cell["beyond_noise"] is False and us["deep_gemm"] < us["cutlass"]
    # the cell where the choice does lose beyond the noise, in every process of both machines
    (m16,) = [c for c in data["cells"] if c["layer"] == "fused_qkv_a_proj" and c["m"] == 16]
    assert m16["beyond_noise"] is True and m16["fastest"] == "deep_gemm"


MOE_0412 = MEASURED.parent / "2026-12-04-h200-bench" / "moe"


def test_re_rendering_a_saved_report_exits_0_and_does_not_claim_a_contradiction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # issue #36: the EP 8 report's `triton` failure was bench's own (a zero reference), fixed since;
    # re-rendering it exited 1 and printed CONTRADICTS A SHIPPED RULE
    assert main(["bench", "--report", str(MOE_0412 / "DeepSeek-V3-moe-ep8.json")]) == 0
    out = capsys.readouterr().out
    assert "CONTRADICTS A SHIPPED RULE" not in out
    assert "failed where a shipped rule calls it valid (a saved report: re-run bench to confirm it)" in out


def test_emitted_policy_names_a_schema_only_where_one_is_found(tmp_path: Path) -> None:
    # issue #36: every emitted file said `$schema=../schemas/rules.schema.json`, valid only in a repository's policy/
    report = str(MEASURED.parent / "2026-12-05-h200-bench" / "all" / "DeepSeek-V3-attn.json")
    loose = tmp_path / "acme.yaml"
    assert main(["bench", "--report", report, "--emit-policy", str(loose)]) == 0
    text = loose.read_text()
    assert "$schema=" not in text.split("# editors:")[0] and "kernelpolicy schema --write DIR" in text
    (tmp_path / "repo" / "schemas").mkdir(parents=True)
    (tmp_path / "repo" / "schemas" / "rules.schema.json").write_text("{}")
    (tmp_path / "repo" / "ops" / "policy").mkdir(parents=True)
    inside = tmp_path / "repo" / "ops" / "policy" / "bench.yaml"
    assert main(["bench", "--report", report, "--emit-policy", str(inside)]) == 0
    assert inside.read_text().startswith("# yaml-language-server: $schema=../../schemas/rules.schema.json\n")
