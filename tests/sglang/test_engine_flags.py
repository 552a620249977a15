"""SGLang's vocabulary (rules/engines/sglang.yaml): the flags `explain` prints for SGLang."""

from __future__ import annotations

import json

import pytest

from kernelpolicy.cli import main
from kernelpolicy.policy import EngineMap
from kernelpolicy.releases.sglang.versions import known_releases, latest_release, release_for
from kernelpolicy.render.flags import engine_flags

#: an SGLang decision (its flags are rendered from it alone)
SGLANG = ("--engine", f"sglang=={latest_release().version}")


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    code = main(["explain", "--json", "--no-env", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _sglang_map() -> EngineMap:
    from kernelpolicy import load_policy

    return load_policy().engines["sglang"]


@pytest.mark.parametrize(
    "argv",
    [
        ("--gpu", "H100", "--model-type", "deepseek_v3", "--quant", "fp8_block"),
        ("--gpu", "B200", "--model-type", "deepseek_v3", "--quant", "fp8_block"),
        ("--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8"),
    ],
)
def test_flags_name_the_decided_backends(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    d = _explain(capsys, *argv, *SGLANG)
    sg = d["engine"]["sglang"]
    engine = _sglang_map()
    rel = latest_release()
    args = dict(zip(sg["args"][::2], sg["args"][1::2], strict=True))
    dense, moe = d["paths"]["dense"]["backend"], d["paths"]["moe"]["backend"]
    name = engine.dense_kernels[dense][0]
    assert args.get("--fp8-gemm-backend") == (name if rel.accepts("--fp8-gemm-backend", name) else None)
    assert args["--moe-runner-backend"] == engine.moe_flag[moe]
    uses_dg = dense in ("deep_gemm", "flashinfer_deep_gemm") or moe == "deep_gemm"
    assert ("SGLANG_ENABLE_JIT_DEEPGEMM" in sg["env"]) is not uses_dg
    assert any("router" in n for n in sg["notes"])


def test_seed_sm121_turns_deep_gemm_off(capsys: pytest.CaptureFixture[str]) -> None:
    d = _explain(capsys, "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", *SGLANG)
    sg = d["engine"]["sglang"]
    assert sg["env"] == {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    assert sg["args"] == [
        "--fp8-gemm-backend",
        "cutlass",
        "--moe-runner-backend",
        "triton",
        "--attention-backend",
        "flashinfer",
    ]


# -- attention (issue #39): SGLang's own choice, generated from its wheels (attention.sglang.yaml)


@pytest.mark.parametrize(
    ("gpu", "model", "engine", "backend", "flag"),
    [
        # MHA: FA3 on Hopper, TRT-LLM MHA on SM100, FlashInfer elsewhere (get_default_attn_backend)
        ("H100", "Qwen/Qwen3-8B-FP8", "sglang==0.5.23", "flash_attn", "fa3"),
        ("B200", "Qwen/Qwen3-8B-FP8", "sglang==0.5.23", "trtllm_mha", "trtllm_mha"),
        ("A100", "Qwen/Qwen3-8B-FP8", "sglang==0.5.23", "flashinfer", "flashinfer"),
        # MLA: FA3 on Hopper, Triton off Hopper and SM100; DeepSeek's own override on SM100
        # (model_overrides/deepseek_v2.py: TRT-LLM MLA)
        ("H100", "deepseek-ai/DeepSeek-V3", "sglang==0.5.23", "flash_attn", "fa3"),
        ("A100", "deepseek-ai/DeepSeek-V3", "sglang==0.5.23", "triton_attn", "triton"),
        ("B200", "deepseek-ai/DeepSeek-V3", "sglang==0.5.23", "trtllm_mla", "trtllm_mla"),
        # gpt-oss's own override: FA3 on Hopper, Triton on sm120 (sinks: no FlashInfer)
        ("H100", "openai/gpt-oss-20b", "sglang==0.5.23", "flash_attn", "fa3"),
        ("RTX 5090", "openai/gpt-oss-20b", "sglang==0.5.23", "triton_attn", "triton"),
    ],
)
def test_the_attention_backend_is_sglangs_own_choice(
    capsys: pytest.CaptureFixture[str], gpu: str, model: str, engine: str, backend: str, flag: str
) -> None:
    d = _explain(capsys, "--gpu", gpu, "--model", model, "--engine", engine)
    assert d["paths"]["attention"]["backend"] == backend
    args = d["engine"]["sglang"]["args"]
    assert args[args.index("--attention-backend") + 1] == flag


def test_the_attention_order_follows_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3 on B200: SGLang 0.5.12 sets TRT-LLM MLA in ServerArgs itself, as 0.5.23's model
    override does; both read from their wheels."""
    for release in ("0.5.12", "0.5.23"):
        d = _explain(capsys, "--gpu", "B200", "--model", "deepseek-ai/DeepSeek-V3", "--engine", f"sglang=={release}")
        assert d["paths"]["attention"]["backend"] == "trtllm_mla", release


def test_human_output_prints_the_sglang_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["explain", "--no-env", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--explain=full", *SGLANG]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    line = out.split("on SGLang without the plugin, where flags can:\n", 1)[1].splitlines()[0]
    assert line.strip().startswith("SGLANG_ENABLE_JIT_DEEPGEMM=0 python -m sglang.launch_server --model-path")
    assert "--moe-runner-backend triton" in line
    from kernelpolicy._install import install_command

    assert f"names per-layer fallbacks:  {install_command()} (with SGLANG_PLUGINS set" in out


def test_a_backend_an_older_release_lacks_is_a_note() -> None:
    """0.5.12.post1 has no `marlin` for `--fp4-gemm-backend` (0.5.23 has); neither has it for FP8,
    where `SGLANG_FORCE_FP8_MARLIN=1` selects it; the checkpoint's format picks the flag."""
    from kernelpolicy.decision import PathDecision

    old = release_for("0.5.12.post1")
    assert old is not None and not old.accepts("--fp4-gemm-backend", "marlin")
    paths = {
        "dense": PathDecision("dense", "marlin"),
        "moe": PathDecision("moe", "flashinfer_trtllm"),
        "router": PathDecision("router", None, present=False),
        "warmup": PathDecision("warmup", None, kernels=()),
    }
    nvfp4, fp8 = {"quant.scheme": "nvfp4"}, {"quant.scheme": "fp8_block"}
    new = engine_flags(paths, _sglang_map(), "0.5.23", nvfp4)
    assert new["args"][:2] == ["--fp4-gemm-backend", "marlin"]
    assert "SGLANG_FORCE_FP8_MARLIN" not in new["env"]
    flags = engine_flags(paths, _sglang_map(), "0.5.12.post1", nvfp4)
    assert flags["args"] == ["--moe-runner-backend", "flashinfer_trtllm"]
    assert any("0.5.12.post1 has no dense GEMM flag value for `marlin`" in n for n in flags["notes"])
    for release in ("0.5.12.post1", "0.5.23"):  # an FP8 checkpoint: no flag value, the variable
        on_fp8 = engine_flags(paths, _sglang_map(), release, fp8)
        assert on_fp8["env"]["SGLANG_FORCE_FP8_MARLIN"] == "1"
        assert "--fp4-gemm-backend" not in on_fp8["args"]
    weight_only = engine_flags(paths, _sglang_map(), "0.5.23", {"quant.scheme": "w4a16"})
    assert "SGLANG_FORCE_FP8_MARLIN" not in weight_only["env"]  # AWQ/GPTQ: Marlin is SGLang's own pick
    unknown = engine_flags(paths, _sglang_map(), "0.4.0")
    assert unknown["args"] == [] and "not a release" in unknown["notes"][0]


def test_mxfp4_experts_take_sglang_s_mxfp4_runner_names() -> None:
    """`Mxfp4MoEMethod` raises on `flashinfer_trtllm`/`flashinfer_cutlass`: MXFP4 experts are
    `flashinfer_mxfp4` (FlashInfer's kernel by GPU) and OpenAI's triton_kernels `triton_kernel`."""
    from kernelpolicy.decision import PathDecision
    from kernelpolicy.releases.sglang.flags import moe_ids_of

    def moe_flag(backend: str, scheme: str) -> list[str]:
        paths = {
            "dense": PathDecision("dense", None, present=False),
            "moe": PathDecision("moe", backend),
            "router": PathDecision("router", None, present=False),
            "warmup": PathDecision("warmup", None, kernels=()),
        }
        return list(engine_flags(paths, _sglang_map(), "0.5.23", {"quant.moe_scheme": scheme})["args"])

    assert moe_flag("flashinfer_trtllm", "mxfp4") == ["--moe-runner-backend", "flashinfer_mxfp4"]
    assert moe_flag("flashinfer_cutlass", "mxfp4") == ["--moe-runner-backend", "flashinfer_mxfp4"]
    assert moe_flag("triton", "mxfp4") == ["--moe-runner-backend", "triton_kernel"]
    assert moe_flag("flashinfer_trtllm", "fp8_block") == ["--moe-runner-backend", "flashinfer_trtllm"]
    ids = moe_ids_of(_sglang_map())
    assert ids["flashinfer_mxfp4"] == {"flashinfer_trtllm", "flashinfer_cutlass"}
    assert ids["triton_kernel"] == {"triton"}


def test_every_flag_value_is_accepted_by_some_release() -> None:
    """The vocabulary names only values SGLang's flags take (a typo would print a failing command)."""
    engine = _sglang_map()
    rels = known_releases().values()
    for names in engine.dense_kernels.values():
        assert any(r.accepts(f, names[0]) for r in rels for f in ("--fp8-gemm-backend", "--fp4-gemm-backend")), names
    for value in engine.moe_flag.values():
        assert any(r.accepts("--moe-runner-backend", value) for r in rels), value


def test_engine_option_picks_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    """NVFP4 dense on B200 via Marlin: 0.5.23's --fp4-gemm-backend has `marlin`, 0.5.12.post1's has not."""
    argv = ("--gpu", "B200", "--model-type", "deepseek_v3", "--quant", "nvfp4", "--linear-backend", "marlin")
    new = _explain(capsys, *argv, "--engine", "sglang==0.5.23")["engine"]["sglang"]
    old = _explain(capsys, *argv, "--engine", "sglang==0.5.12.post1")["engine"]["sglang"]
    assert new["args"][:2] == ["--fp4-gemm-backend", "marlin"]
    assert "--fp4-gemm-backend" not in old["args"]
    assert any("0.5.12.post1 has no dense GEMM flag value for `marlin`" in n for n in old["notes"])


def test_engine_option_refuses_an_unknown_release(capsys: pytest.CaptureFixture[str]) -> None:
    # a published release before the scanned ones (0.4.0) is answered with a warning
    # (tests/test_release_range.py); one the index never had is refused
    code = main(
        [
            "explain",
            "--no-env",
            "--gpu",
            "H100",
            "--model-type",
            "llama",
            "--quant",
            "fp8_block",
            "--engine",
            "sglang==0.4.99",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    from kernelpolicy.releases.sglang.versions import known_releases

    known = list(known_releases())
    assert known[0] == "0.5.12" and known[-1] == "0.5.23" and len(known) == 15  # every release scanned
    assert err == (
        "kernelpolicy: error: --engine `sglang==0.4.99`: not an SGLang release kernelpolicy knows "
        f"(known: {', '.join(known)})"
    )


def test_a_per_tensor_fp8_checkpoint_gets_no_fp8_gemm_flag() -> None:
    """`--fp8-gemm-backend` does not steer per-tensor FP8 linears (`apply_fp8_linear` picks per
    call), yet SGLang validates it for every FP8 linear: `cutlass` off sm12x stops start-up (the
    audit found it on Mixtral-8x7B-FP8 on H100)."""
    from kernelpolicy.decision import PathDecision

    paths = {
        "dense": PathDecision("dense", "cutlass"),
        "moe": PathDecision("moe", None, present=False),
        "router": PathDecision("router", None, present=False),
        "warmup": PathDecision("warmup", None, kernels=()),
    }
    for scheme in ("fp8_tensor", "fp8_channel"):
        flags = engine_flags(paths, _sglang_map(), "0.5.23", {"quant.scheme": scheme})
        assert "--fp8-gemm-backend" not in flags["args"] and "--fp4-gemm-backend" not in flags["args"]
    block = engine_flags(paths, _sglang_map(), "0.5.23", {"quant.scheme": "fp8_block"})
    assert block["args"] == ["--fp8-gemm-backend", "cutlass"]


SEED = "Qwen/Qwen3.6-35B-A3B-FP8"


@pytest.mark.parametrize("gpu", ["B200", "GB200", "B300"])
def test_a_vllm_decision_prints_no_sglang_line(gpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    """As the issue found it: the seed model's decision (vLLM's) also printed an SGLang line,
    `--fp8-gemm-backend cutlass` in `engine.sglang.args` and in `--explain=full`, the backend the
    SGLang decision rejects as a crash (`sglang-cutlass-block-fp8-needs-sm12x`). A decision holds
    for its own engine: its flags only; an SGLang decision gives SGLang's."""
    argv = ("--gpu", gpu, "--model", SEED)
    vllm = _explain(capsys, *argv)
    assert vllm["facts"]["deploy.engine"] == "vllm" and set(vllm["engine"]) == {"vllm"}
    assert main(["explain", "--no-env", *argv, "--explain=full"]) == 0
    text = capsys.readouterr().out
    assert "sglang.launch_server" not in text and "on SGLang without the plugin" not in text
    assert "vllm serve" in text
    sglang = _explain(capsys, *argv, *SGLANG)
    assert set(sglang["engine"]) == {"sglang"}
    cutlass = next(c for c in sglang["paths"]["dense"]["candidates"] if c["backend"] == "cutlass")
    assert cutlass["verdict"] == "rejected" and "sglang-cutlass-block-fp8-needs-sm12x" in cutlass["rules"]
    assert "cutlass" not in sglang["engine"]["sglang"]["args"]
    assert main(["explain", "--no-env", *argv, *SGLANG, "--explain=full"]) == 0
    text = capsys.readouterr().out
    assert "python -m sglang.launch_server" in text and "vllm serve" not in text


def test_an_sglang_launch_line_prints_sglang_flags_only(capsys: pytest.CaptureFixture[str]) -> None:
    d = _explain(capsys, "--gpu", "B200", "--", "python3", "-m", "sglang.launch_server", "--model-path", SEED)
    assert d["facts"]["deploy.engine"] == "sglang" and set(d["engine"]) == {"sglang"}


#: deployments that reached the vLLM-only rules (each of these listed a `vllm.*` assumption on SGLang)
_REACHED = [
    ("GB200", SEED, ()),  # triton-fp8-moe-lora-lhs-dtype: "assumed `vllm.version` >=0.24 for `triton`"
    ("GB200", SEED, ("--fact", "deploy.lora=true")),
    ("sm121", SEED, ()),  # cutlass-block-fp8-sm121-native-build: `vllm.cuda_archs`
    ("H100", "deepseek-ai/DeepSeek-V3", ()),  # dsv3-router-removed-0.29
    ("GH200", "MiniMaxAI/MiniMax-M2", ()),  # deep_gemm-gh200-minimax_m2-illegal-address
    ("sm121", "openai/gpt-oss-120b", ()),  # the catalog's MXFP4 Triton on sm12x (vLLM >= 0.33)
]


@pytest.mark.parametrize(("gpu", "model", "extra"), _REACHED)
@pytest.mark.parametrize("engine", [("--engine", "sglang==0.5.23"), ("--fact", "deploy.engine=sglang")])
def test_an_sglang_decision_assumes_no_vllm_fact(
    gpu: str, model: str, extra: tuple[str, ...], engine: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """As the issue found it: an SGLang decision listed "assumed `vllm.version` >=0.24 for
    `triton`" (a vLLM incident's rule). A rule of one engine's incident names that engine; the
    SGLang decision is the same, without the vLLM facts."""
    sglang = _explain(capsys, "--gpu", gpu, "--model", model, *engine, *extra)
    assert [a for a in sglang["assumptions"] if a["fact"].startswith("vllm.")] == []
    vllm = _explain(capsys, "--gpu", gpu, "--model", model, *extra)
    assert [a for a in vllm["assumptions"] if a["fact"].startswith("sglang.")] == []


def test_a_rule_reading_one_engines_facts_holds_on_that_engine_only() -> None:
    """Every shipped rule whose `when` or `require` reads a `vllm.*` (`sglang.*`) fact names its
    engine: its `when` is false on the other engine, whatever else is unknown (so no decision of
    the other engine applies or assumes it). An `until` may read one engine's fact: it ends a
    rule that holds on both engines where that engine escapes the fault (FlashInfer's monolithic
    TRT-LLM MoE, which vLLM's modular path avoids)."""
    from kernelpolicy import load_policy
    from kernelpolicy.dsl.conditions import evaluate, tests_of

    unscoped = []
    for rule in load_policy().rules:
        keys = {t.key for c in (rule.when, rule.require) for t in tests_of(c)}
        for engine, other in (("vllm", "sglang"), ("sglang", "vllm")):
            reads = any(k.startswith(f"{engine}.") for k in keys)
            if reads and evaluate(rule.when, {"deploy.engine": other}) is not False:
                unscoped.append((rule.id, engine))
    assert unscoped == []
