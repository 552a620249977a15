"""The attention decision applied by the real plugin inside each vLLM release (issue #39).

Every deployment below runs in one vLLM process per release (``simulate_many``): vLLM builds its
``VllmConfig`` from the served flags, the kernelpolicy plugin is registered as vLLM registers it,
and the probe asks vLLM's own attention selector (``get_attn_backend``, as the model's layers
ask it) which backend the decoder layers run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pytest

from kernelpolicy.engines.vllm.conformance import SWEEP_SERVE
from kernelpolicy.engines.vllm.testing import Deployment, NativeChoices, simulate_many

pytestmark = pytest.mark.vllm

QWEN = "Qwen/Qwen3-32B-FP8"  # dense MHA, head size 128: FLASH_ATTN first on sm90 in every release
GPT_OSS = "openai/gpt-oss-20b"  # attention sinks
H100 = (9, 0)

TRITON: Final = {"deploy.attention_backend": "triton_attn"}
FLASHINFER: Final = {"deploy.attention_backend": "flashinfer"}
#: a FlashInfer whose Hopper FP8-KV prefill does not compile (rule `flashinfer-attn-fp8-kv-hopper-jit`)
OLD_FLASHINFER: Final = {"flashinfer.version": "0.6.3"}
#: name -> (model, serve flags beyond the sweep's, plugin environment, operator facts
#: (``KERNELPOLICY_FACTS``), plugin on)
_CASES: dict[str, tuple[str, dict[str, Any], dict[str, str], dict[str, str], bool]] = {
    "alone": (QWEN, {}, {}, {}, False),
    # the decision ranks Triton first (an explicit choice stated as an operator fact): vLLM alone runs FLASH_ATTN
    "decided": (QWEN, {}, {}, TRITON, True),
    "disabled": (QWEN, {}, {"KERNELPOLICY_DISABLE": "1"}, TRITON, True),
    # the operator's own --attention-backend, which the decision keeps
    "operator": (QWEN, {"attention_backend": "TRITON_ATTN"}, {}, {}, True),
    # the operator's --attention-backend FLASHINFER with an FP8 KV cache on Hopper and a FlashInfer
    # before 0.6.4 (stated: every release under test pins a later one): a crash rule refuses it
    "operator-refused": (QWEN, {"attention_backend": "FLASHINFER", "kv_cache_dtype": "fp8"}, {}, OLD_FLASHINFER, True),
    "operator-refused-strict": (
        QWEN,
        {"attention_backend": "FLASHINFER", "kv_cache_dtype": "fp8"},
        {"KERNELPOLICY_STRICT": "1"},
        OLD_FLASHINFER,
        True,
    ),
    # a stated fact against the operator's flag: the flag runs, the fact is a conflict
    "stated-against-flag": (
        QWEN,
        {"attention_backend": "TRITON_ATTN"},
        {},
        {"deploy.attention_backend": "flash_attn"},
        True,
    ),
    # vLLM's FLASHINFER has no attention sinks: vLLM refuses the decided backend for gpt-oss's layers
    "vllm-refuses": (GPT_OSS, {}, {}, FLASHINFER, True),
    "vllm-refuses-strict": (GPT_OSS, {}, {"KERNELPOLICY_STRICT": "1"}, FLASHINFER, True),
}
_RUNS: dict[str, dict[str, NativeChoices]] = {}


def _runs(release: str, venv: Any, catalog: Any) -> dict[str, NativeChoices]:
    if release not in _RUNS:
        deployments = [
            Deployment(
                config=catalog(model),
                gpu=H100,
                env=env,
                facts=facts or None,
                plugin=plugin,
                model_id=model,
                serve={**SWEEP_SERVE, **serve},
            )
            for model, serve, env, facts, plugin in _CASES.values()
        ]
        ran = simulate_many(venv(release), deployments, timeout=900)
        _RUNS[release] = dict(zip(_CASES, ran, strict=True))
    return _RUNS[release]


def _decision(run: NativeChoices) -> Mapping[str, Any]:
    decisions = (run.plugin or {}).get("decisions") or []
    assert len(decisions) == 1, (run.plugin, run.errors)
    return dict(decisions[0])


def test_vllm_runs_the_decided_backend(release: str, venv: Any, catalog: Any) -> None:
    runs = _runs(release, venv, catalog)
    alone, decided = runs["alone"], runs["decided"]
    assert alone.attention is not None and alone.attention.backend == "FLASH_ATTN", alone.errors
    assert _decision(decided)["paths"]["attention"]["backend"] == "triton_attn"
    assert decided.attention is not None and decided.attention.backend == "TRITON_ATTN", decided.errors
    assert decided.attention.config_backend == "TRITON_ATTN"  # the live config the model's layers read
    assert "attention" in (decided.plugin or {})["patched"]
    assert not (decided.plugin or {})["fallbacks"]


def test_disabled_plugin_leaves_vllms_choice(release: str, venv: Any, catalog: Any) -> None:
    run = _runs(release, venv, catalog)["disabled"]
    assert run.attention is not None and run.attention.backend == "FLASH_ATTN", run.errors
    assert not (run.plugin or {}).get("patched")


def test_operators_backend_is_a_fact_and_stands(release: str, venv: Any, catalog: Any) -> None:
    run = _runs(release, venv, catalog)["operator"]
    decision = _decision(run)
    assert decision["facts"]["deploy.attention_backend"] == "triton_attn"  # read from vLLM's config
    assert decision["paths"]["attention"] == {"backend": "triton_attn", "rule": "--attention-backend triton_attn"}
    assert run.attention is not None and run.attention.backend == "TRITON_ATTN", run.errors
    assert not (run.plugin or {})["conflicts"]


def test_operators_backend_refused_by_a_rule_is_a_conflict(release: str, venv: Any, catalog: Any) -> None:
    run = _runs(release, venv, catalog)["operator-refused"]
    plugin = run.plugin or {}
    decision = _decision(run)
    assert decision["facts"]["deploy.attention_backend"] == "flashinfer"
    assert decision["paths"]["attention"]["backend"] == "triton_attn"
    # the operator's explicit choice wins in vLLM, and the plugin records the conflict
    assert run.attention is not None and run.attention.backend == "FLASHINFER", run.errors
    assert plugin["conflicts"] == [
        {
            "path": "attention",
            "operator": "FLASHINFER",
            "decided": "triton_attn",
            "rule": decision["paths"]["attention"]["rule"],
        }
    ]
    assert any("--attention-backend `FLASHINFER` stands" in w for w in plugin["warnings"]), plugin["warnings"]


def test_strict_stops_on_a_refused_operator_backend(release: str, venv: Any, catalog: Any) -> None:
    run = _runs(release, venv, catalog)["operator-refused-strict"]
    error = run.errors.get("attention", "")
    assert "AdapterError" in error and "--attention-backend `FLASHINFER` stands" in error, run.errors


def test_a_stated_fact_against_the_flag_is_a_conflict_the_flag_wins(release: str, venv: Any, catalog: Any) -> None:
    run = _runs(release, venv, catalog)["stated-against-flag"]
    decision = _decision(run)
    assert decision["facts"]["deploy.attention_backend"] == "triton_attn"
    assert run.attention is not None and run.attention.backend == "TRITON_ATTN", run.errors
    warnings = (run.plugin or {})["warnings"]
    assert any("`deploy.attention_backend` = `flash_attn`" in w and "a conflict" in w for w in warnings), warnings


def test_vllm_refusing_the_decided_backend_leaves_its_own(release: str, venv: Any, catalog: Any) -> None:
    runs = _runs(release, venv, catalog)
    run = runs["vllm-refuses"]
    assert _decision(run)["paths"]["attention"]["backend"] == "flashinfer"
    assert run.attention is not None and run.attention.backend not in (None, "FLASHINFER"), run.errors
    fallbacks = [f for f in (run.plugin or {})["fallbacks"] if f["path"] == "attention"]
    assert len(fallbacks) == 1, (run.plugin or {})["fallbacks"]
    assert fallbacks[0]["decided"] == "flashinfer"
    assert fallbacks[0]["used"] == f"{run.attention.backend} (vLLM's own)"
    assert "sink" in fallbacks[0]["reason"]
    strict = runs["vllm-refuses-strict"]
    error = strict.errors.get("attention", "")
    assert "AdapterError" in error and "refused the decided backend `flashinfer`" in error, strict.errors
