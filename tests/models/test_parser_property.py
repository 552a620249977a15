"""Property tests of the config parser: any config.json ends in exit 0, 2 or 3, never an
internal error, and a valid config's facts survive a trip through the file system."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelpolicy.cli import main
from kernelpolicy.facts import Facts
from kernelpolicy.facts.model import locate_model
from kernelpolicy.facts.quant import ModelConfigError, config_facts

from .test_quant import CASES

pytestmark = pytest.mark.property

_SEEDS = [cfg for cfg, _hq, _exp in CASES.values()]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def broken_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A published config with some values replaced by arbitrary JSON."""
    config = copy.deepcopy(draw(st.sampled_from(_SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(config) if p]
        path = draw(st.sampled_from(paths))
        parent = config
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = draw(_JSON)
    return config


_QUANT = {
    "fp8_block": {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"},
    "fp8_tensor": {"quant_method": "fp8", "activation_scheme": "static"},
    "nvfp4": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
    "w4a16": {"quant_method": "gptq", "bits": 4, "group_size": 128},
    "none": None,
}


@st.composite
def valid_configs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, object]]:
    """A well-formed config and the facts it must give."""
    experts = draw(st.integers(0, 512))
    name = draw(st.sampled_from(["num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"]))
    scheme = draw(st.sampled_from(sorted(_QUANT)))
    text: dict[str, Any] = {
        "model_type": draw(st.sampled_from(["llama", "qwen3_moe", "deepseek_v3", "mixtral"])),
        "hidden_size": draw(st.integers(64, 16384)),
        "intermediate_size": draw(st.integers(64, 65536)),
        name: experts,
        "hidden_act": "silu",
        "torch_dtype": "bfloat16",
    }
    config: dict[str, Any] = dict(text)
    if draw(st.booleans()):  # a multimodal wrapper
        config = {"model_type": "wrapper", "architectures": ["XForConditionalGeneration"], "text_config": text}
    if _QUANT[scheme] is not None:
        config["quantization_config"] = dict(_QUANT[scheme])
    expected: dict[str, object] = {"model.is_moe": experts > 1, "quant.scheme": scheme}
    if experts > 1:
        expected["model.num_experts"] = experts
        expected["quant.moe_scheme"] = scheme
    return config, expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=broken_configs())
def test_any_config_exits_0_2_or_3(config: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        code = main(["explain", "--gpu", "sm121", "--model", tmp, "--no-env"])
    err = capsys.readouterr().err
    assert code in (0, 2, 3), err
    assert "internal error" not in err
    if code == 2:
        assert err.startswith("kernelpolicy: error: ") and err.count("\n") == 1, err


@settings(max_examples=300, deadline=None)
@given(config=broken_configs())
def test_parser_gives_facts_of_the_vocabulary_or_a_named_error(config: dict[str, Any]) -> None:
    error: ModelConfigError | None = None
    try:
        facts = config_facts(config)
    except ModelConfigError as exc:
        error = exc
    if error is not None:
        assert str(error).startswith("`config.json`: ")
        assert "\n" not in str(error)
    else:
        Facts.from_values(facts, source="config.json")  # every value fits its key's domain


@settings(max_examples=150, deadline=None)
@given(case=valid_configs())
def test_valid_config_facts_round_trip(case: tuple[dict[str, Any], dict[str, object]]) -> None:
    config, expected = case
    facts = config_facts(config)
    assert {k: facts.get(k) for k in expected} == expected
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        found = locate_model(tmp, ())
        assert found.source == "config.json"
        assert found.model_facts() == facts
