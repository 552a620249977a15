from __future__ import annotations

import json
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.errors import FactError, UnknownGPUError, UnknownModelError
from kernelpolicy.facts import Facts, parse_fact_text
from kernelpolicy.facts.gpu import facts_from_spec
from kernelpolicy.facts.model import ModelConfigError, facts_from_config


@pytest.mark.parametrize(
    ("spec", "sm", "family"),
    [
        ("sm121", "sm121", "sm120"),
        ("12.1", "sm121", "sm120"),
        ("121", "sm121", "sm120"),
        ("sm_121a", "sm121", "sm120"),
        ("sm90", "sm90", "sm90"),
        ("9.0", "sm90", "sm90"),
        ("sm100", "sm100", "sm100"),
        ("10.3", "sm103", "sm100"),
        ("sm120", "sm120", "sm120"),
    ],
)
def test_capability_specs(spec: str, sm: str, family: str) -> None:
    f = facts_from_spec(spec)
    assert (f["gpu.sm"], f["gpu.family"]) == (sm, family)


@pytest.mark.parametrize(
    ("name", "sm", "host"),
    [
        ("GB10", "sm121", "aarch64"),
        ("DGX Spark", "sm121", "aarch64"),
        ("dgx-spark", "sm121", "aarch64"),
        ("RTX PRO 6000", "sm120", None),
        ("RTX 5090", "sm120", None),
        ("H100", "sm90", None),
        ("H200", "sm90", None),
        ("B200", "sm100", None),
        ("GB200", "sm100", "aarch64"),
        ("B300", "sm103", None),
        ("Jetson Thor", "sm110", "aarch64"),
    ],
)
def test_product_names(policy: kp.Policy, name: str, sm: str, host: str | None) -> None:
    f = facts_from_spec(name, policy.gpus)
    assert f["gpu.sm"] == sm
    assert f.get("host.machine") == host


@pytest.mark.parametrize("spec", ["sm999", "13.5", "H2000", "", "sm1210"])
def test_unknown_gpu(policy: kp.Policy, spec: str) -> None:
    with pytest.raises(UnknownGPUError) as err:
        facts_from_spec(spec, policy.gpus)
    assert f"`{spec}`" in str(err.value)


def test_unknown_gpu_suggests_product(policy: kp.Policy) -> None:
    with pytest.raises(UnknownGPUError, match="did you mean"):
        facts_from_spec("H2000", policy.gpus)


def test_multimodal_config_reads_text_model_type() -> None:
    cfg = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "hidden_size": 2048,
            "num_experts": 256,
            "moe_intermediate_size": 512,
            "hidden_act": "silu",
            "dtype": "bfloat16",
        },
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    f = facts_from_config(cfg)
    assert f["model.type"] == "qwen3_5_moe_text"
    assert f["model.architecture"] == "Qwen3_5MoeForConditionalGeneration"
    assert f["model.is_moe"] is True and f["model.num_experts"] == 256
    assert f["model.intermediate_size"] == 512
    assert f["quant.scheme"] == "fp8_block" and f["quant.block"] == [128, 128]
    assert f["quant.moe_scheme"] == "fp8_block"
    assert f["quant.scale_fmt"] == "fp32"
    assert f["model.router_dtype"] == "bfloat16"


def test_compressed_tensors_block_strategy() -> None:
    cfg = {
        "model_type": "gemma4",
        "text_config": {
            "model_type": "gemma4_text",
            "hidden_size": 5376,
            "intermediate_size": 21504,
        },
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "config_groups": {
                "group_0": {
                    "weights": {
                        "num_bits": 8,
                        "type": "float",
                        "strategy": "block",
                        "block_structure": [128, 128],
                    }
                }
            },
        },
    }
    f = facts_from_config(cfg)
    assert f["quant.scheme"] == "fp8_block"
    assert f["model.is_moe"] is False
    assert "quant.moe_scheme" not in f


@pytest.mark.parametrize(
    ("qc", "scheme"),
    [
        ({"quant_method": "fp8"}, "fp8_tensor"),
        ({"quant_method": "fbgemm_fp8"}, "fp8_channel"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}},
            },
            "fp8_channel",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
            },
            "nvfp4",
        ),
        ({"quant_method": "gptq", "bits": 4}, "w4a16"),
    ],
)
def test_quant_schemes(qc: dict[str, object], scheme: str) -> None:
    assert facts_from_config({"model_type": "x", "quantization_config": qc})["quant.scheme"] == scheme


def test_deepseek_v4_experts_and_scale_format(policy: kp.Policy) -> None:
    f = kp.facts_for(gpu="sm121", model="deepseek-ai/DeepSeek-V4-Flash", policy=policy)
    assert f.get("quant.scheme") == "fp8_block"
    assert f.get("quant.moe_scheme") == "mxfp4"
    assert f.get("quant.scale_fmt") == "ue8m0"
    assert f.get("model.router_dtype") == "bfloat16"
    assert f.sources["model.router_dtype"] == "catalog"
    assert f.sources["model.type"] == "catalog"


def test_gpt_oss_experts_are_mxfp4(policy: kp.Policy) -> None:
    f = kp.facts_for(gpu="sm90", model="openai/gpt-oss-120b", policy=policy)
    assert f.get("quant.scheme") == "none"
    assert f.get("quant.moe_scheme") == "mxfp4"


def test_local_folder_and_file(tmp_path: Path, policy: kp.Policy) -> None:
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for spec in (tmp_path, tmp_path / "config.json"):
        f = kp.facts_for(gpu="sm90", model=str(spec), policy=policy)
        assert f.get("model.type") == "llama"
        assert f.sources["model.type"] == "config.json"
        assert f.get("quant.scheme") == "none"


def test_folder_without_config(tmp_path: Path, policy: kp.Policy) -> None:
    with pytest.raises(UnknownModelError, match="no `config.json`"):
        kp.facts_for(gpu="sm90", model=str(tmp_path), policy=policy)


def test_unreadable_config(tmp_path: Path, policy: kp.Policy) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelConfigError, match=r"config.json`: not valid JSON: .* at line 1"):
        kp.facts_for(gpu="sm90", model=str(tmp_path), policy=policy)


def test_unknown_model_suggests_typos_only(policy: kp.Policy) -> None:
    with pytest.raises(UnknownModelError, match="did you mean `Qwen/Qwen3.6-35B-A3B-FP8`"):
        kp.facts_for(gpu="sm90", model="Qwen/Qwen3.6-35B-A3B-FB8", policy=policy)
    # other numbers name another model, not a misspelling of a catalog one
    with pytest.raises(UnknownModelError) as err:
        kp.facts_for(gpu="sm90", model="Qwen/Qwen3-14B-FP8", policy=policy)
    assert "did you mean" not in str(err.value)


def test_catalog_ids_are_case_insensitive(policy: kp.Policy) -> None:
    f = kp.facts_for(gpu="sm90", model="qwen/qwen3.6-35b-a3b-fp8", policy=policy)
    assert f.get("model.type") == "qwen3_5_moe_text"


def test_every_catalog_model_parses(policy: kp.Policy) -> None:
    assert len(policy.models) >= 12
    for m in policy.models:
        f = kp.facts_for(gpu="sm121", model=m.id, policy=policy)
        assert f.get("model.type"), m.id
        assert f.get("quant.scheme"), m.id
        assert m.source.startswith("https://huggingface.co/"), m.id


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        ("deep_gemm.has_sm120_sf_layout", "false", False),
        ("deep_gemm.has_sm120_sf_layout", "1", True),
        ("deploy.tp", "2", 2),
        ("quant.block", "[128, 128]", (128, 128)),
        ("vllm.version", "0.26.0", "0.26.0"),
        ("vllm.version", "0.26", "0.26"),
        ("gpu.sm", "sm121", "sm121"),
        ("deploy.env.VLLM_USE_DEEP_GEMM", "0", "0"),
    ],
)
def test_parse_fact_text(key: str, text: str, value: object) -> None:
    assert parse_fact_text(key, text) == value


@pytest.mark.parametrize(
    ("key", "text", "match"),
    [
        ("gpu.smm", "sm121", "did you mean `gpu.sm`"),
        ("gpu.sm", "sm122", "not one of"),
        ("deploy.tp", "two", "not an integer"),
        ("vllm.version", "zero", "not a valid version"),
        ("deep_gemm.has_sm120_sf_layout", "maybe", "not true or false"),
        ("deploy.env.1BAD", "x", "unknown fact key"),
    ],
)
def test_bad_fact_text(key: str, text: str, match: str) -> None:
    with pytest.raises(FactError, match=match):
        parse_fact_text(key, text)


def test_facts_are_immutable_and_hashable() -> None:
    a = Facts.from_values({"gpu.sm": "sm121", "deploy.tp": 1})
    b = Facts.from_values({"deploy.tp": 1, "gpu.sm": "sm121"})
    assert a == b and hash(a) == hash(b)
    with pytest.raises(Exception):  # noqa: B017, PT011 - pydantic's frozen error
        a.values = {}  # type: ignore[misc]


def test_user_facts_win_over_derived(policy: kp.Policy) -> None:
    f = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", facts={"model.type": "llama"}, policy=policy)
    assert f.get("model.type") == "llama" and f.sources["model.type"] == "user"


def test_engine_alias_for_moe_backend(policy: kp.Policy) -> None:
    f = kp.facts_for(gpu="sm90", model="deepseek-ai/DeepSeek-V3", moe_backend="cutlass", policy=policy)
    assert f.get("deploy.moe_backend") == "vllm_cutlass"
    with pytest.raises(FactError, match="not a moe backend"):
        kp.facts_for(gpu="sm90", model="deepseek-ai/DeepSeek-V3", moe_backend="nope", policy=policy)


def test_derived_gpu_facts_agree_with_the_shipped_implications() -> None:
    """`derived_gpu_facts` (the check's GPU dimension, the contradiction check) and the
    implications in rules/implies/gpu.yaml (what `explain` shows) say the same for every SM."""
    from kernelpolicy.facts.gpu import derived_gpu_facts
    from kernelpolicy.facts.keys import GPU_SMS
    from kernelpolicy.resolver import apply_implications

    policy = kp.load_policy(environ=False)
    for sm in GPU_SMS:
        derived = derived_gpu_facts(sm)
        given = {k: derived[k] for k in ("gpu.sm", "gpu.family", "gpu.cc")}
        implied = apply_implications(kp.Facts.from_values(given, source="user"), policy).values
        for key in ("gpu.has_fp8", "gpu.has_tcgen05"):
            assert implied.get(key, derived[key]) == derived[key], (sm, key)
        assert "gpu.has_fp8" in implied, sm
