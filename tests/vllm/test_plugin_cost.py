"""The plugin inside a model's start-up on real vLLM releases (simulated GPU): it gathers facts
and decides once however many layers ask, and nothing of it runs per forward pass
(``benchmarks/bench_vllm.py`` prints the times of the same run)."""

from __future__ import annotations

from typing import Any

import pytest

import kernelpolicy as kp
from kernelpolicy.engines.vllm.testing import plugin_cost

pytestmark = pytest.mark.vllm

MODEL = "deepseek-ai/DeepSeek-V3"
LAYERS = 3


def test_start_up_decides_once_and_the_forward_pass_never_enters_kernelpolicy(venv: Any, release: str) -> None:
    model = next(m for m in kp.load_policy(environ=False).models if m.id == MODEL)
    cost = plugin_cost(venv(release), "sm90", model.config, layers=LAYERS, rounds=1, model_id=MODEL)
    # every layer asks at each of its selection points (four linears, the MoE oracle, the
    # router's two methods, the warmup gates): the facts are gathered and resolved once
    asks = cost.calls_to("kernelpolicy.engines.vllm.plugin.current_decision")
    assert asks >= 7 * LAYERS, cost.startup_calls
    assert cost.calls_to("kernelpolicy.engines.vllm._facts.facts_from_vllm") == 1
    assert cost.calls_to("kernelpolicy.resolver.resolve") == 1
    # a decode step: every layer's router forward runs, and not one call enters kernelpolicy
    assert cost.step["router_forwards"] == LAYERS
    assert cost.step_calls == {}
    # what the forward pass calls holds no kernelpolicy code; the router gate only in the
    # methods vLLM calls while it builds the model
    assert cost.reaches.pop("router GateLinear") == ("GateLinear.__init__", "GateLinear.set_out_dtype")
    assert any(name.startswith("linear kernel ") for name in cost.reaches)
    assert all(reach == () for reach in cost.reaches.values()), cost.reaches
    assert len(cost.off_s) == len(cost.on_s) == 1 and cost.per_point_s > 0
