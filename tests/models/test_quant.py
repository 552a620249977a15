"""The typed config parser: one published config per quantization method, wrong types, fuzzing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.cli import main
from kernelpolicy.facts.quant import ModelConfigError, config_facts

from . import configs as c

# (config, hf_quant_config.json or None, the facts it must give); absent keys: must be absent
CASES: dict[str, tuple[dict[str, Any], dict[str, Any] | None, dict[str, object]]] = {
    "fp8-block-moe": (
        c.QWEN3_30B_A3B_FP8,
        None,
        {
            "model.type": "qwen3_moe",
            "model.is_moe": True,
            "model.num_experts": 128,
            "model.experts_per_token": 8,
            "model.intermediate_size": 768,
            "model.moe_routing": "renormalize_naive",
            "quant.method": "fp8",
            "quant.scheme": "fp8_block",
            "quant.moe_scheme": "fp8_block",
            "quant.block": [128, 128],
            "quant.activation_scheme": "dynamic",
            "quant.scale_fmt": "fp32",
        },
    ),
    "fp8-block-deepseek": (
        c.DEEPSEEK_V3,
        None,
        {"model.num_experts": 256, "model.moe_routing": "deepseek_v3", "quant.scheme": "fp8_block"},
    ),
    "fp8-tensor-static": (
        c.MIXTRAL_FP8_STATIC,
        None,
        {
            "model.num_experts": 8,
            "model.intermediate_size": 14336,
            "quant.scheme": "fp8_tensor",
            "quant.activation_scheme": "static",
        },
    ),
    "fbgemm-fp8-channel": (c.LLAMA_405B_FBGEMM, None, {"model.is_moe": False, "quant.scheme": "fp8_channel"}),
    "ct-fp8-channel": (
        c.LLAMA_8B_CT_FP8_DYNAMIC,
        None,
        {"quant.method": "compressed-tensors", "quant.scheme": "fp8_channel", "quant.activation_scheme": "dynamic"},
    ),
    "ct-fp8-tensor": (
        c.LLAMA_8B_CT_FP8_STATIC,
        None,
        {"quant.scheme": "fp8_tensor", "quant.activation_scheme": "static"},
    ),
    "ct-fp8-block-nested": (
        c.GEMMA4_CT_FP8_BLOCK,
        None,
        {
            "model.type": "gemma4_text",
            "model.activation": "gelu",
            "quant.scheme": "fp8_block",
            "quant.block": [128, 128],
        },
    ),
    "ct-nvfp4": (
        c.QWEN3_30B_CT_NVFP4,
        None,
        {"quant.scheme": "nvfp4", "quant.moe_scheme": "nvfp4", "quant.group_size": 16, "quant.weight_bits": 4},
    ),
    "ct-w4a16": (
        c.LLAMA_8B_CT_W4A16,
        None,
        {"quant.scheme": "w4a16", "quant.group_size": 128, "quant.weight_bits": 4, "quant.activation_bits": 16},
    ),
    "ct-w4a8": (
        c.LLAMA_8B_CT_W4AFP8,
        None,
        {"quant.method_known": True, "quant.weight_bits": 4, "quant.activation_bits": 8},
    ),
    "modelopt-fp8-file": (
        c.NVIDIA_LLAMA_8B_FP8,
        c.NVIDIA_LLAMA_8B_FP8_HF_QUANT,
        {"quant.method": "modelopt", "quant.modelopt_algo": "FP8", "quant.scheme": "fp8_tensor"},
    ),
    "modelopt-nvfp4-file": (
        c.NVIDIA_DEEPSEEK_R1_FP4,
        c.NVIDIA_DEEPSEEK_R1_FP4_HF_QUANT,
        {"quant.modelopt_algo": "NVFP4", "quant.scheme": "nvfp4", "quant.moe_scheme": "nvfp4", "quant.group_size": 16},
    ),
    "modelopt-fp8-pb-wo": (
        c.MODELOPT_FP8_PB_WO,
        None,
        {"quant.modelopt_algo": "FP8_PB_WO", "quant.scheme": "fp8_block", "quant.block": [128, 128]},
    ),
    "modelopt-mixed": (
        c.MODELOPT_MIXED,
        None,
        {"quant.modelopt_algo": "MIXED_PRECISION", "quant.scheme": "fp8_tensor", "quant.moe_scheme": "nvfp4"},
    ),
    "modelopt-mxfp8": (c.MODELOPT_MXFP8, None, {"quant.scheme": "mxfp8", "quant.modelopt_algo": "MXFP8"}),
    "mxfp4-gpt-oss": (
        c.GPT_OSS_20B,
        None,
        {
            "model.num_experts": 32,
            "model.experts_per_token": 4,
            "quant.scheme": "none",
            "quant.moe_scheme": "mxfp4",
            "quant.scale_fmt": "ue8m0",
        },
    ),
    "gptq-w4a16": (c.QWEN25_7B_GPTQ, None, {"quant.method": "gptq", "quant.scheme": "w4a16", "quant.group_size": 128}),
    "awq-w4a16": (c.QWEN25_7B_AWQ, None, {"quant.method": "awq", "quant.scheme": "w4a16"}),
    "unsupported-bnb": (
        c.LLAMA3_BNB_4BIT,
        None,
        {"quant.method": "bitsandbytes", "quant.method_known": False},
    ),
    "unquantized-nested-llama4": (
        c.LLAMA4_SCOUT,
        None,
        {
            "model.type": "llama4_text",
            "model.architecture": "Llama4ForConditionalGeneration",
            "model.num_experts": 16,
            "model.moe_routing": "llama4",
            "model.router_dtype": "bfloat16",
            "quant.scheme": "none",
        },
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_published_config(name: str) -> None:
    config, hf_quant, expected = CASES[name]
    facts = config_facts(config, quant_file=hf_quant)
    got = {k: (list(v) if isinstance(v, tuple) else v) for k, v in facts.items() if k in expected}
    assert got == expected


def test_w4a8_is_not_called_a_weight_only_scheme() -> None:
    facts = config_facts(c.LLAMA_8B_CT_W4AFP8)
    assert "quant.scheme" not in facts


def test_unsupported_method_has_no_scheme() -> None:
    facts = config_facts(c.LLAMA3_BNB_4BIT)
    assert "quant.scheme" not in facts and "quant.moe_scheme" not in facts


def _explain(tmp_path: Path, config: object, capsys: pytest.CaptureFixture[str], gpu: str = "H100") -> tuple[int, str]:
    folder = tmp_path / "ckpt"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    code = main(["explain", "--gpu", gpu, "--model", str(folder), "--no-env"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [
        (lambda d: d.update(num_experts=128.0), "num_experts", "expected an integer"),
        (lambda d: d.update(num_experts="many"), "num_experts", "expected an integer"),
        (lambda d: d.update(architectures=5), "architectures", "expected a list"),
        (
            lambda d: d["quantization_config"].update(weight_block_size="abc"),
            "quantization_config.weight_block_size",
            "expected a list",
        ),
        (
            lambda d: d["quantization_config"].update(weight_block_size=[128, 0]),
            "quantization_config.weight_block_size",  # the path other fields show (N18; was the bare name)
            "expected positive sizes",
        ),
        (
            lambda d: d["quantization_config"].update(activation_scheme="sometimes"),
            "quantization_config.activation_scheme",
            "expected `static` or `dynamic` (got `'sometimes'`)",
        ),
        (lambda d: d.update(num_experts=True), "num_experts", "expected an integer (got `True`)"),
        (
            lambda d: d["quantization_config"].update(weight_block_size=[128]),
            "quantization_config.weight_block_size",
            "expected 2 items (got `[128]`)",
        ),
        (
            lambda d: d["quantization_config"].update(weight_block_size=[128, "128"]),
            "quantization_config.weight_block_size.1",
            "expected an integer (got `'128'`)",
        ),
        (lambda d: d["quantization_config"].update(quant_method=8), "quantization_config.quant_method", "string"),
    ],
)
def test_wrong_types_name_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any, field: str, reason: str
) -> None:
    config = json.loads(json.dumps(c.QWEN3_30B_A3B_FP8))
    mutate(config)
    code, err = _explain(tmp_path, config, capsys)
    assert code == 2
    assert err.count("\n") == 1, err
    assert "config.json`: field `" + field + "`" in err
    assert reason in err


def test_num_local_experts_float_is_not_a_dense_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = json.loads(json.dumps(c.MIXTRAL_FP8_STATIC))
    config["num_local_experts"] = 8.0
    code, err = _explain(tmp_path, config, capsys)
    assert code == 2 and "field `num_local_experts`: expected an integer" in err


def test_compressed_tensors_num_bits_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = json.loads(json.dumps(c.LLAMA_8B_CT_FP8_DYNAMIC))
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = "eight"
    code, err = _explain(tmp_path, config, capsys)
    assert code == 2
    assert "field `quantization_config.config_groups.group_0.weights.num_bits`: expected an integer" in err


def test_missing_required_field_and_aliases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = json.loads(json.dumps(c.LLAMA_8B_CT_FP8_DYNAMIC))
    del config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"]
    code, err = _explain(tmp_path, config, capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.rstrip().endswith("field `quantization_config.config_groups.group_0.weights.num_bits`: missing")
    # AWQ writes `w_bit` and `q_group_size` (read first), GPTQ `bits` and `group_size`
    awq = {"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "bits": 8}
    facts = config_facts({"model_type": "llama", "quantization_config": awq})
    assert facts["quant.scheme"] == "w4a16" and facts["quant.group_size"] == 128
    gptq = {"quant_method": "gptq", "bits": 8, "group_size": 64}
    assert config_facts({"model_type": "llama", "quantization_config": gptq})["quant.scheme"] == "w8a16"
    with pytest.raises(ModelConfigError, match=r"field `quantization_config.w_bit`: expected an integer"):
        config_facts({"model_type": "llama", "quantization_config": {**awq, "w_bit": "4"}})


def test_nested_text_config_field_is_named_with_its_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = json.loads(json.dumps(c.LLAMA4_SCOUT))
    config["text_config"]["num_local_experts"] = "sixteen"
    code, err = _explain(tmp_path, config, capsys)
    assert code == 2 and "field `text_config.num_local_experts`" in err


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deep_nesting_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int) -> None:
    text = '{"model_type": "llama", "x": ' + "[" * depth + "]" * depth + "}"
    code, err = _explain(tmp_path, text, capsys)
    assert code == 2 and err.count("\n") == 1
    assert "config.json`: nested" in err


def test_hf_quant_config_beside_config_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "nvfp4"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(c.NVIDIA_DEEPSEEK_R1_FP4))
    (folder / "hf_quant_config.json").write_text(json.dumps(c.NVIDIA_DEEPSEEK_R1_FP4_HF_QUANT))
    assert main(["explain", "--gpu", "B200", "--model", str(folder), "--json", "--no-env"]) in (0, 3)
    decision = json.loads(capsys.readouterr().out)
    assert decision["facts"]["quant.scheme"] == "nvfp4"
    assert decision["sources"]["quant.scheme"] == "config.json"


def test_bad_hf_quant_config_names_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(c.NVIDIA_LLAMA_8B_FP8))
    (folder / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": 8}}))
    code = main(["explain", "--gpu", "H100", "--model", str(folder), "--no-env"])
    err = capsys.readouterr().err
    assert code == 2 and "hf_quant_config.json`: field `quantization.quant_algo`: expected a string" in err


def test_limit_is_below_the_interpreter_recursion_limit() -> None:
    from kernelpolicy.facts.quant import MAX_DEPTH

    assert sys.getrecursionlimit() > MAX_DEPTH * 4
    with pytest.raises(ModelConfigError, match="nested deeper"):
        config_facts({"model_type": "x", "a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})


def test_python_built_config_with_tuples() -> None:
    # vLLM's plugin hands the parser `hf_config.to_dict()`, where sequences may be tuples
    config = json.loads(json.dumps(c.QWEN3_30B_A3B_FP8))
    config["quantization_config"]["weight_block_size"] = (128, 128)
    config["architectures"] = ("Qwen3MoeForCausalLM",)
    assert config_facts(config)["quant.block"] == [128, 128]


def test_unsupported_method_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _explain(tmp_path, c.LLAMA3_BNB_4BIT, capsys)
    assert code == 2 and err.count("\n") == 1
    assert "quantization `bitsandbytes` (fact `quant.method_known` is false)" in err


def test_modelopt_body_nested_as_vllm_merges_it() -> None:
    # vLLM adds quant_method to the whole hf_quant_config.json: the algorithm stays under `quantization`
    qc = {**c.NVIDIA_DEEPSEEK_R1_FP4_HF_QUANT, "quant_method": "modelopt_fp4"}
    facts = config_facts({**c.NVIDIA_DEEPSEEK_R1_FP4, "quantization_config": qc})
    assert (facts["quant.scheme"], facts["quant.group_size"]) == ("nvfp4", 16)


def test_config_records_are_immutable_values() -> None:
    from kernelpolicy.facts._records import read
    from kernelpolicy.facts.quant import Fp8Config

    raw = {"quant_method": "fp8", "weight_block_size": [128, 128], "unknown_key": 1}
    a, b = read(Fp8Config, raw), read(Fp8Config, dict(raw))
    assert a == b and a is not b and a != read(Fp8Config, {"quant_method": "fp8"})
    assert a.weight_block_size == [128, 128] and a.ignored_layers is None
    assert repr(a).startswith("Fp8Config(quant_method='fp8', activation_scheme=None, weight_block_size=[128, 128]")
    with pytest.raises(AttributeError, match="immutable"):
        a.quant_method = "ptpc_fp8"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field `unknown_key`"):
        Fp8Config(quant_method="fp8", unknown_key=1)  # type: ignore[call-arg]


# -- format variants (issue #35): how the experts' activations are scaled, mixed checkpoints


@pytest.mark.parametrize(
    ("name", "scale", "mixed"),
    [
        ("ct-nvfp4", "per_tensor", False),  # `tensor_group`: 16-element blocks under one global scale
        ("modelopt-nvfp4-file", "per_tensor", False),  # ModelOpt's calibrated `input_scale`
        ("fp8-block-moe", "per_group", False),
        ("modelopt-mixed", "per_tensor", True),  # FP8 linears, NVFP4 experts
        ("mxfp4-gpt-oss", None, True),  # BF16 activations into MXFP4 experts
        ("fbgemm-fp8-channel", None, None),  # a dense model: no experts, no expert facts
    ],
)
def test_the_experts_activation_scale_and_mixing_are_read(name: str, scale: str | None, mixed: bool | None) -> None:
    config, hf_quant, _ = CASES[name]
    facts = config_facts(config, quant_file=hf_quant)
    assert facts.get("quant.moe_activation_scale") == scale
    assert facts.get("quant.mixed") == mixed


def _with_expert_group(strategy: str) -> dict[str, Any]:
    qc = json.loads(json.dumps(c.QWEN3_30B_CT_NVFP4["quantization_config"]))
    first = next(iter(qc["config_groups"].values()))
    experts = json.loads(json.dumps(first))
    experts["targets"] = ["re:.*mlp.experts.*"]
    experts["input_activations"]["strategy"] = strategy
    experts["input_activations"]["dynamic"] = True
    qc["config_groups"]["experts"] = experts
    return {**c.QWEN3_30B_CT_NVFP4, "quantization_config": qc}


def test_a_per_token_expert_group_and_a_mixed_checkpoint_reach_explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "per-token"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_with_expert_group("token")))
    assert main(["explain", "--gpu", "B200", "--model", str(folder), "--json", "--no-env"]) in (0, 3)
    d = json.loads(capsys.readouterr().out)
    assert d["facts"]["quant.moe_activation_scale"] == "per_token"
    assert d["sources"]["quant.moe_activation_scale"] == "config.json"
    # an MXFP8 linear / NVFP4 expert ModelOpt checkpoint
    mixed = json.loads(json.dumps(c.MODELOPT_MIXED))
    layers = mixed["quantization_config"]["quantized_layers"]
    for k in layers:
        if "expert" not in k:
            layers[k] = {"quant_algo": "MXFP8"}
    (folder / "config.json").write_text(json.dumps(mixed))
    assert main(["explain", "--gpu", "B200", "--model", str(folder), "--json", "--no-env"]) in (0, 3)
    f = json.loads(capsys.readouterr().out)["facts"]
    assert (f["quant.scheme"], f["quant.moe_scheme"], f["quant.mixed"]) == ("mxfp8", "nvfp4", True)
    assert f["quant.moe_activation_scale"] == "per_tensor"
