"""`quant.input_transform` read from a compressed-tensors `transform_config`, as vLLM 0.34 decides
whether Humming's NVFP4 kernel fuses the checkpoint's input Hadamard (issue 35: the kernel was only
chosen when the fact was stated)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.cli import main
from kernelpolicy.facts.quant import ModelConfigError, config_facts

NVFP4 = {
    "quant_method": "compressed-tensors",
    "format": "nvfp4-pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
            "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
        }
    },
}


def _group(kind: str = "hadamard", size: int = 128, *locations: str) -> dict[str, Any]:
    apply = [{"targets": ["Linear"], "location": loc} for loc in (locations or ("input", "weight_input"))]
    return {"type": kind, "head_dim": size, "apply": apply}


def _facts(transform: dict[str, Any] | None) -> dict[str, Any]:
    qc = dict(NVFP4) if transform is None else {**NVFP4, "transform_config": {"config_groups": transform}}
    return config_facts({"model_type": "llama", "quantization_config": qc})


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        (None, "none"),
        ({"u": _group()}, "hadamard"),
        ({"u": _group(size=64), "v": _group(size=64)}, "hadamard"),
        ({"u": _group(size=256)}, None),  # a block size Humming does not fuse
        ({"u": _group(size=64), "v": _group(size=128)}, None),  # two sizes
        ({"u": _group("random-hadamard")}, None),
        ({"u": _group("hadamard", 128, "input", "output")}, None),  # an output transform
        ({"u": _group("hadamard", 128, "weight_input")}, "none"),  # folded into the weights offline
    ],
)
def test_the_transform_config_as_vllm_reads_it(groups: dict[str, Any] | None, expected: str | None) -> None:
    facts = _facts(groups)
    assert facts.get("quant.input_transform") == expected
    assert facts["quant.scheme"] == "nvfp4"


def test_a_malformed_transform_config_names_the_field() -> None:
    with pytest.raises(ModelConfigError, match="transform_config"):
        config_facts({"model_type": "llama", "quantization_config": {**NVFP4, "transform_config": [1]}})


def test_a_hadamard_checkpoint_is_decided_for_humming_on_vllm_0_34(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "vocab_size": 128256,
        "torch_dtype": "bfloat16",
        "quantization_config": {**NVFP4, "transform_config": {"config_groups": {"u": _group()}}},
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    code = main(["explain", "--no-env", "--json", "--gpu", "B200", "--engine", "vllm==0.34.0", "--model", str(folder)])
    out = capsys.readouterr().out
    assert code in (0, 3, 5)
    d = json.loads(out)
    assert d["facts"]["quant.input_transform"] == "hadamard"
    assert d["paths"]["dense"]["backend"] == "humming_hadamard"
