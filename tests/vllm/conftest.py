"""Fixtures for the integration tests against real vLLM releases (``-m vllm``).

The releases are those of ``tests/vllm/releases.txt``; their venvs come from
``scripts/vllm-venv.sh VERSION``; point at others with
``KERNELPOLICY_VLLM_026_PYTHON``, ``KERNELPOLICY_VLLM_029_PYTHON`` or ``KERNELPOLICY_VLLM_034_PYTHON``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelpolicy.engines.vllm.testing import NativeChoices, default_venv_python, parse_gpu, simulate

ROOT = Path(__file__).resolve().parents[2]
_LISTED = (ROOT / "tests" / "vllm" / "releases.txt").read_text(encoding="utf-8").splitlines()
#: release -> the variable naming its venv's python (scripts/test.sh exports it)
_ENV = {
    v: f"KERNELPOLICY_VLLM_{''.join(v.split('.')[:2])}_PYTHON"
    for v in (line.strip() for line in _LISTED)
    if v and not v.startswith("#")
}
#: The releases the integration tests run against (scripts/test.sh builds their venvs).
RELEASES = tuple(_ENV)
_CACHE: dict[str, NativeChoices] = {}


def venv_python(version: str) -> Path:
    override = os.environ.get(_ENV[version])
    python = Path(override) if override else default_venv_python(version)
    if not python.is_file():
        pytest.skip(f"no vLLM {version} venv at {python}: run `scripts/vllm-venv.sh {version}` or set {_ENV[version]}")
    return python


def catalog_config(model_id: str, *, stand_in: bool = False) -> dict[str, Any]:
    """The catalog's config.json excerpt of *model_id* (*stand_in*: see :data:`GEMMA4_STAND_IN`)."""
    data = yaml.safe_load((ROOT / "rules" / "models.yaml").read_text(encoding="utf-8"))
    for entry in data["models"]:
        if entry["id"] == model_id:
            config = dict(entry["config"])
            if stand_in and str(config.get("model_type", "")).startswith("gemma4"):
                return _llama_stand_in(config)
            return config
    raise LookupError(model_id)


#: vLLM releases that cannot build a gemma-4 ModelConfig here: 0.26.0's arch convertor reads
#: ``hf_text_config.head_dim``, which transformers 5.24 (what pip resolves for vllm==0.26.0)
#: refuses on gemma-4 (head_dim differs per layer: AmbiguousGlobalPerLayerAttributeError), with
#: any config. Those runs use a Llama of gemma-4's width carrying its quantization_config.
GEMMA4_STAND_IN = frozenset({"0.26.0"})


def _llama_stand_in(config: dict[str, Any]) -> dict[str, Any]:
    text = dict(config.get("text_config") or config)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(text.get("hidden_size", 5376)),
        "intermediate_size": int(text.get("intermediate_size", 21504)),
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "vocab_size": 32000,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
        "quantization_config": config["quantization_config"],
    }


def cached_simulate(python: Any, gpu: Any, config: Any, **kwargs: Any) -> NativeChoices:
    """:func:`simulate`, once per distinct argument set for the whole session (a run is ~30-50 s)."""
    kwargs.pop("timeout", None)
    key = json.dumps([str(python), list(parse_gpu(gpu)), config, kwargs], sort_keys=True, default=str)
    if key not in _CACHE:
        _CACHE[key] = simulate(python, gpu, config, timeout=400, **kwargs)
    return _CACHE[key]


def run(version: str, gpu: str, model_id: str, **kwargs: Any) -> NativeChoices:
    """Simulate *model_id* (its catalog config) on vLLM *version*, cached per argument set."""
    config = catalog_config(model_id, stand_in=version in GEMMA4_STAND_IN)
    return cached_simulate(venv_python(version), gpu, config, **kwargs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``release`` runs once per release of :data:`RELEASES`."""
    if "release" in metafunc.fixturenames:
        metafunc.parametrize("release", RELEASES)


@pytest.fixture
def releases() -> tuple[str, ...]:
    """:data:`RELEASES`."""
    return RELEASES


@pytest.fixture
def sim() -> Any:
    return run


@pytest.fixture
def simulate_cached() -> Any:
    """:func:`cached_simulate`, for code under test that calls ``simulate`` itself."""
    return cached_simulate


@pytest.fixture
def venv() -> Any:
    """``venv(version) -> python``; skips the test when that venv is missing."""
    return venv_python


@pytest.fixture(scope="session")
def catalog() -> Any:
    """``catalog(model_id) -> config.json`` (:func:`catalog_config`)."""
    return catalog_config
