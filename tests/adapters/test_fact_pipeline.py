"""The one fact pipeline: the CLI and the vLLM plugin build facts the same way (no vLLM needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kernelpolicy as kp
from kernelpolicy.deployment.pipeline import FACTS_ENV, build_facts, env_names, environ_facts
from kernelpolicy.engines._runtime import core_policy
from kernelpolicy.engines.vllm import plugin
from kernelpolicy.facts import Facts

QWEN = "Qwen/Qwen3.6-35B-A3B-FP8"
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def policy() -> kp.Policy:
    return kp.load_policy()


def _env_keys_in_rule_files() -> set[str]:
    """Every ``deploy.env.NAME`` and engine ``env`` name written in the shipped YAML (by text)."""
    import yaml

    names: set[str] = set()
    for path in (SRC.parent / "rules").rglob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        names |= {
            line.split("deploy.env.", 1)[1].split(":", 1)[0].strip()
            for line in text.splitlines()
            if "deploy.env." in line
        }
        data = yaml.safe_load(text) or {}
        engine = data.get("engine") if isinstance(data, dict) else None
        for entry in (engine or {}).get("env", []) if isinstance(engine, dict) else []:
            names.add(str(entry["name"]))
    return names


def test_env_names_are_every_variable_a_shipped_rule_reads(policy: kp.Policy) -> None:
    names = env_names(policy)
    assert "VLLM_MARLIN_INPUT_DTYPE" in names  # a `when:` of rules/known/moe.yaml
    assert "VLLM_USE_DEEP_GEMM" in names  # an engine env entry of rules/engines/vllm.yaml
    assert set(names) == _env_keys_in_rule_files()


def test_env_names_follow_an_operator_policy(tmp_path: Path) -> None:
    rule = tmp_path / "op.yaml"
    rule.write_text(
        "rules:\n"
        "  - id: op-no-triton-when-my-flag\n"
        "    when: {deploy.env.MY_SITE_FLAG: '1'}\n"
        "    deny: [triton]\n"
        "    severity: perf\n"
        "    because: our site flag says so\n",
        encoding="utf-8",
    )
    assert "MY_SITE_FLAG" in env_names(kp.load_policy([rule]))
    assert "MY_SITE_FLAG" not in env_names(kp.load_policy())


def test_environ_reads_only_variables_rules_read(policy: kp.Policy) -> None:
    built = environ_facts({"VLLM_MARLIN_INPUT_DTYPE": "fp8", "VLLM_UNRELATED": "1", "HOME": "/root"}, policy)
    assert built.facts.values == {"deploy.env.VLLM_MARLIN_INPUT_DTYPE": "fp8"}
    assert built.facts.sources == {"deploy.env.VLLM_MARLIN_INPUT_DTYPE": "env"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{bad", "KERNELPOLICY_FACTS: not valid JSON: expecting property name"),
        ("[1]", "KERNELPOLICY_FACTS: expected a JSON object of fact keys, got a JSON array"),
        ('{"gpu.sm": null}', "KERNELPOLICY_FACTS: fact `gpu.sm`: `null` is not a value"),
        ('{"gpu.sm": "sm999"}', "KERNELPOLICY_FACTS: fact `gpu.sm`: `sm999` is not one of"),
    ],
)
def test_bad_kernelpolicy_facts_is_one_line_naming_the_variable(policy: kp.Policy, raw: str, message: str) -> None:
    with pytest.raises(kp.KernelPolicyError) as info:
        environ_facts({FACTS_ENV: raw}, policy)
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text and "Error(" not in text


def test_misspelt_key_is_a_warning_and_strict_makes_it_an_error(policy: kp.Policy) -> None:
    built = environ_facts({FACTS_ENV: '{"gpu.smm": "sm121", "triton.version": "3.5.0"}'}, policy)
    assert built.facts.values == {"triton.version": "3.5.0"}
    assert built.warnings == ("KERNELPOLICY_FACTS: fact `gpu.smm`: unknown fact key (did you mean `gpu.sm`?); ignored",)
    with pytest.raises(kp.KernelPolicyError, match=r"KERNELPOLICY_FACTS: fact `gpu.smm`: unknown fact key"):
        environ_facts({FACTS_ENV: '{"gpu.smm": "sm121"}', "KERNELPOLICY_STRICT": "1"}, policy)


def test_layers_win_in_order(policy: kp.Policy) -> None:
    derived = Facts.from_values({"gpu.sm": "sm121", "deploy.env.VLLM_USE_DEEP_GEMM": "0"}, source="vllm")
    environ = {"VLLM_USE_DEEP_GEMM": "1", FACTS_ENV: '{"triton.version": "3.5.0"}'}
    built = build_facts(policy, derived=derived, environ=environ, facts={"triton.version": "3.6.0"})
    assert built.facts.get("deploy.env.VLLM_USE_DEEP_GEMM") == "1"
    assert built.facts.sources["deploy.env.VLLM_USE_DEEP_GEMM"] == "env"
    assert built.facts.get("triton.version") == "3.6.0" and built.facts.sources["triton.version"] == "user"
    assert built.facts.get("deploy.tp") == 1 and built.facts.sources["deploy.tp"] == "default"
    assert build_facts(policy, derived=derived, environ=None).facts.get("deploy.env.VLLM_USE_DEEP_GEMM") == "0"


# ----------------------------------------------------------------------------- explain


def _explain(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KERNELPOLICY_"))}
    return subprocess.run(
        [sys.executable, "-m", "kernelpolicy", "explain", "--gpu", "sm121", "--model", QWEN, *argv],
        capture_output=True,
        text=True,
        env={**base, "PYTHONPATH": str(SRC), **(env or {})},
        timeout=120,
        check=False,
    )


def test_explain_reads_the_shell_environment_and_no_env_ignores_it() -> None:
    shell = {"VLLM_USE_DEEP_GEMM": "1", FACTS_ENV: '{"triton.version": "3.5.0"}'}
    with_env = _explain("--json", env=shell)
    assert with_env.returncode in (0, 3, 5), with_env.stderr  # 5: a crash rule refuses VLLM_USE_DEEP_GEMM=1
    data = json.loads(with_env.stdout)
    assert data["facts"]["deploy.env.VLLM_USE_DEEP_GEMM"] == "1"
    assert data["sources"]["deploy.env.VLLM_USE_DEEP_GEMM"] == "env"
    assert data["sources"]["triton.version"] == "env"
    without = json.loads(_explain("--json", "--no-env", env=shell).stdout)
    assert "deploy.env.VLLM_USE_DEEP_GEMM" not in without["facts"] and "triton.version" not in without["facts"]
    assert without["fingerprint"] != data["fingerprint"]
    # the same inputs given as flags give the same decision
    flags = json.loads(_explain("--json", "--env", "VLLM_USE_DEEP_GEMM=1", "--fact", "triton.version=3.5.0").stdout)
    assert flags["fingerprint"] == data["fingerprint"]


def test_explain_warns_on_a_misspelt_key_and_refuses_null() -> None:
    warned = _explain(env={FACTS_ENV: '{"gpu.smm": "sm90"}'})
    assert warned.returncode == 0
    assert warned.stderr.strip() == (
        "kernelpolicy: warning: KERNELPOLICY_FACTS: fact `gpu.smm`: unknown fact key (did you mean `gpu.sm`?); ignored"
    )
    strict = _explain(env={FACTS_ENV: '{"gpu.smm": "sm90"}', "KERNELPOLICY_STRICT": "1"})
    assert strict.returncode == 2 and len(strict.stderr.strip().splitlines()) == 1
    assert "KERNELPOLICY_FACTS" in strict.stderr
    null = _explain(env={FACTS_ENV: '{"gpu.sm": null}'})
    assert null.returncode == 2 and null.stdout == ""
    assert null.stderr.strip().splitlines() == [
        "kernelpolicy: error: KERNELPOLICY_FACTS: fact `gpu.sm`: `null` is not a value "
        "(leave the key out to keep the detected value)"
    ]


# ----------------------------------------------------------------------------- the plugin


@pytest.fixture
def vllm_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A vLLM-like process: the plugin's facts come from a fake config, resolved by the core."""
    for name in [n for n in os.environ if n.startswith(("VLLM_", "KERNELPOLICY_"))]:
        monkeypatch.delenv(name)
    seen: dict[str, Any] = {}
    derived = {"gpu.sm": "sm121", "gpu.family": "sm120", "gpu.cc": "12.1", "model.type": "qwen3_5_moe_text"}
    derived |= {"model.is_moe": True, "quant.scheme": "fp8_block", "quant.block": [128, 128]}
    monkeypatch.setattr("kernelpolicy.engines.vllm._facts.facts_from_vllm", lambda c, catalog=(): dict(derived))
    cfg = types.SimpleNamespace(model_config=object())
    monkeypatch.setitem(sys.modules, "vllm.config", types.SimpleNamespace(get_current_vllm_config_or_none=lambda: cfg))

    def resolver(facts: Any) -> Any:
        seen["facts"] = facts
        return plugin._core_resolver(facts)

    plugin.unpatch()
    plugin.set_resolver(resolver)
    seen["derived"] = derived
    yield seen
    plugin.unpatch()
    plugin.set_resolver(None)


def test_plugin_records_every_variable_a_rule_reads(
    vllm_process: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_MARLIN_INPUT_DTYPE", "fp8")
    monkeypatch.setenv("VLLM_UNRELATED_KNOB", "1")
    decision: Any = plugin.current_decision()
    assert decision is not None
    facts = vllm_process["facts"]
    assert facts.get("deploy.env.VLLM_MARLIN_INPUT_DTYPE") == "fp8"
    assert "deploy.env.VLLM_UNRELATED_KNOB" not in facts


def test_plugin_and_explain_build_the_same_facts(vllm_process: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_USE_DEEP_GEMM", "1")
    monkeypatch.setenv(FACTS_ENV, '{"triton.version": "3.5.0"}')
    decision: Any = plugin.current_decision()
    assert decision is not None
    policy = kp.load_policy()
    cli = build_facts(policy, derived=Facts.from_values(vllm_process["derived"], source="spec"), environ=os.environ)
    assert vllm_process["facts"].values == cli.facts.values
    explained = kp.resolve(cli.facts, policy)
    assert decision.facts.values == explained.facts.values
    assert decision.fingerprint == explained.fingerprint


def test_plugin_messages_name_the_variable_without_reprs(
    vllm_process: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setenv(FACTS_ENV, "{bad")
    assert plugin.current_decision() is None
    monkeypatch.setenv(FACTS_ENV, '{"gpu.sm": null}')
    assert plugin.current_decision() is None
    monkeypatch.setenv(FACTS_ENV, '{"gpu.smm": "sm90"}')
    assert plugin.current_decision() is not None, "a misspelt key is a warning, not a failure"
    warnings = plugin.status()["warnings"]
    assert any(w.startswith("could not gather facts: KERNELPOLICY_FACTS: not valid JSON") for w in warnings), warnings
    assert any("KERNELPOLICY_FACTS: fact `gpu.sm`: `null` is not a value" in w for w in warnings), warnings
    assert "KERNELPOLICY_FACTS: fact `gpu.smm`: unknown fact key (did you mean `gpu.sm`?); ignored" in warnings
    assert not any("Error(" in w or "\n" in w for w in warnings), warnings
    # strict: the misspelt key stops the decision
    plugin.unpatch()
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    with pytest.raises(plugin.AdapterError, match=r"KERNELPOLICY_FACTS: fact `gpu.smm`: unknown fact key"):
        plugin.current_decision()


def test_plugin_names_kernelpolicy_policy_when_it_does_not_load(
    vllm_process: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - id: x\n    when: {gpu.smm: sm90}\n", encoding="utf-8")
    monkeypatch.setenv("KERNELPOLICY_POLICY", str(bad))
    core_policy.cache_clear()
    try:
        assert plugin.current_decision() is None
        (warning,) = plugin.status()["warnings"]
        assert warning.startswith(
            f"could not gather facts: could not load the rule tables (with KERNELPOLICY_POLICY=`{bad}`): "
        )
        assert "bad.yaml" in warning and "PolicyError(" not in warning and "Diagnostic(" not in warning
    finally:
        monkeypatch.delenv("KERNELPOLICY_POLICY")
        core_policy.cache_clear()


def test_plugin_gathers_facts_once_per_config(vllm_process: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM asks at every selection point of every layer; once registered (the environment
    fixed), the facts are gathered once per config, and again for a config that differs."""
    gathered: list[Any] = []

    def facts_from_vllm(config: Any, catalog: Any = ()) -> dict[str, Any]:
        gathered.append(config)
        tp = config.parallel_config.tensor_parallel_size
        return {**vllm_process["derived"], "deploy.tp": tp}

    monkeypatch.setattr("kernelpolicy.engines.vllm._facts.facts_from_vllm", facts_from_vllm)
    model = types.SimpleNamespace(model="/models/x", revision=None, served_model_name=None, hf_config=None)
    configs = [
        types.SimpleNamespace(model_config=model, parallel_config=types.SimpleNamespace(tensor_parallel_size=tp))
        for tp in (1, 1, 2)
    ]
    current = [configs[0]]
    monkeypatch.setitem(
        sys.modules, "vllm.config", types.SimpleNamespace(get_current_vllm_config_or_none=lambda: current[0])
    )
    monkeypatch.setattr(plugin._STATE, "environ", dict(os.environ))  # as register() fixes it
    first = plugin.current_decision()
    assert first is not None
    assert all(plugin.current_decision() is first for _ in range(100))
    current[0] = configs[1]  # another config object with the same fields
    assert plugin.current_decision() is first
    assert gathered == [configs[0]]
    current[0] = configs[2]  # another tensor-parallel size: gathered again, decided again
    other: Any = plugin.current_decision()
    assert gathered == [configs[0], configs[2]]
    assert other is not first and other.facts.get("deploy.tp") == 2


HOPPER_FP8 = "Qwen/Qwen3-235B-A22B-FP8"  # block-FP8 experts: FlashInfer CUTLASS crashes past 16384 tokens on sm90


def test_a_stated_fact_contradicting_the_engine_is_a_conflict_the_engine_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the issue found it: `KERNELPOLICY_FACTS` stated a batch budget of 1024 while vLLM ran
    32768; the plugin decided with the stated 1024 (keeping `flashinfer_cutlass`, the MoE kernel
    a crash rule names past 16384 tokens on Hopper) where `explain` of the serve line decided with
    32768, and neither said so. Both now report the conflict, and the engine's value decides."""
    stated = '{"deploy.max_num_batched_tokens": 1024}'
    for name in [n for n in os.environ if n.startswith(("VLLM_", "KERNELPOLICY_"))]:
        monkeypatch.delenv(name)
    running = {"deploy.max_num_batched_tokens": 32768, "deploy.moe_backend": "flashinfer_cutlass"}
    derived = {**kp.facts_for(gpu="H100", model=HOPPER_FP8).values, **running}  # what the plugin reads
    monkeypatch.setattr("kernelpolicy.engines.vllm._facts.facts_from_vllm", lambda c, catalog=(): dict(derived))
    cfg = types.SimpleNamespace(model_config=object())
    monkeypatch.setitem(sys.modules, "vllm.config", types.SimpleNamespace(get_current_vllm_config_or_none=lambda: cfg))
    monkeypatch.setenv(FACTS_ENV, stated)
    plugin.unpatch()
    plugin.set_resolver(None)
    monkeypatch.setattr(plugin._STATE, "environ", dict(os.environ))
    try:
        decision: Any = plugin.current_decision()
        warnings = plugin.status()["warnings"]
    finally:
        plugin.unpatch()
    assert decision is not None and decision.facts.get("deploy.max_num_batched_tokens") == 32768
    conflict = "KERNELPOLICY_FACTS states `deploy.max_num_batched_tokens` = `1024`, but {} runs with `32768`"
    assert any(conflict.format("vLLM") in w and "the engine's value decides" in w for w in warnings), warnings
    assert decision.paths["moe"].backend != "flashinfer_cutlass"
    assert any(conflict.format("vLLM") in w for w in decision.warnings)  # the decision records it
    line = ["vllm", "serve", HOPPER_FP8, "--max-num-batched-tokens", "32768", "--moe-backend", "flashinfer_cutlass"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KERNELPOLICY_"))}
    explained = subprocess.run(
        [sys.executable, "-m", "kernelpolicy", "explain", "--gpu", "H100", "--json", "--", *line],
        capture_output=True,
        text=True,
        env={**base, "PYTHONPATH": str(SRC), FACTS_ENV: stated},
        timeout=120,
        check=False,
    )
    assert explained.returncode == 5, explained.stderr  # the explicit flashinfer_cutlass refused
    assert conflict.format("the launch line") in explained.stderr
    data = json.loads(explained.stdout)
    assert data["facts"]["deploy.max_num_batched_tokens"] == 32768
    assert any(conflict.format("the launch line") in w for w in data["warnings"])  # the decision records it
    assert data["paths"]["moe"]["backend"] == decision.paths["moe"].backend
