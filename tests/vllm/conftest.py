"""Fixtures for the integration tests against real vLLM releases (``-m vllm``).

The venvs come from ``scripts/vllm-venv.sh VERSION``; point at others with
``KERNELPOLICY_VLLM_026_PYTHON`` / ``KERNELPOLICY_VLLM_033_PYTHON``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelpolicy.testing.vllm import NativeChoices, default_venv_python, simulate

ROOT = Path(__file__).resolve().parents[2]
_ENV = {"0.26.0": "KERNELPOLICY_VLLM_026_PYTHON", "0.33.0": "KERNELPOLICY_VLLM_033_PYTHON"}
_CACHE: dict[str, NativeChoices] = {}


def venv_python(version: str) -> Path:
    override = os.environ.get(_ENV[version])
    python = Path(override) if override else default_venv_python(version)
    if not python.is_file():
        pytest.skip(
            f"no vLLM {version} venv at {python}: run `scripts/vllm-venv.sh {version}` "
            f"or set {_ENV[version]}"
        )
    return python


def catalog_config(model_id: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "rules" / "models.yaml").read_text(encoding="utf-8"))
    for entry in data["models"]:
        if entry["id"] == model_id:
            return dict(entry["config"])
    raise LookupError(model_id)


def run(version: str, gpu: str, model_id: str, **kwargs: Any) -> NativeChoices:
    """Simulate once per distinct argument set for the whole session (each run is ~30-50 s)."""
    key = repr((version, gpu, model_id, sorted(kwargs.items(), key=str)))
    if key not in _CACHE:
        _CACHE[key] = simulate(
            venv_python(version), gpu, catalog_config(model_id), timeout=400, **kwargs
        )
    return _CACHE[key]


@pytest.fixture
def sim() -> Any:
    return run
