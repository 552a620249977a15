"""The attention decision applied in a real vLLM (issue #39): ``engines.vllm._attention`` sets
``attention_config.backend`` of each release's own ``AttentionConfig`` to a member of that
release's own ``AttentionBackendEnum``, the field vLLM's selector reads (``get_attn_backend`` in
``vllm/v1/attention/selector.py``, 0.26 to 0.34)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]

_PROBE = r"""
import json, sys
from types import SimpleNamespace
from vllm.config import AttentionConfig
from vllm.v1.attention.backends.registry import AttentionBackendEnum
from kernelpolicy.engines.vllm._attention import apply_attention

out = {}
for backend, mla, family in json.loads(sys.argv[1]):
    config = SimpleNamespace(attention_config=AttentionConfig())
    decision = SimpleNamespace(
        paths={"attention": SimpleNamespace(backend=backend)},
        facts={"model.mla": mla, "gpu.family": family},
    )
    name = apply_attention(config, decision)
    member = config.attention_config.backend
    out[f"{backend}|{mla}|{family}"] = [name, None if member is None else member.name]
print(json.dumps(out))
"""

_CASES = [
    ["flash_attn", False, "sm90"],
    ["flashinfer", True, "sm100"],
    ["triton_attn", True, "sm120"],
    ["flashinfer_mla_sparse", True, "sm120"],
    ["trtllm_mha", False, "sm100"],
]


def test_the_decided_backend_is_vllms_own_member(release: str, venv: Any) -> None:
    python = venv(release)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [str(python), "-c", _PROBE, json.dumps(_CASES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["flash_attn|False|sm90"] == ["FLASH_ATTN", "FLASH_ATTN"]
    assert got["flashinfer|True|sm100"] == ["FLASHINFER_MLA", "FLASHINFER_MLA"]
    assert got["triton_attn|True|sm120"] == ["TRITON_MLA", "TRITON_MLA"]
    assert got["flashinfer_mla_sparse|True|sm120"] == ["FLASHINFER_MLA_SPARSE_SM120", "FLASHINFER_MLA_SPARSE_SM120"]
    # vLLM has no name for SGLang's TRT-LLM backend: nothing is set, vLLM decides
    assert got["trtllm_mha|False|sm100"] == [None, None]
