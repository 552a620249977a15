"""The resolver's semantics, on small hand-written rule tables and on the shipped ones."""

from __future__ import annotations

from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.dsl.loader import SourceFile, load_files
from kernelpolicy.errors import FactError, PolicyError
from kernelpolicy.facts import Facts
from kernelpolicy.render.flags import engine_flags, with_engine_flags
from kernelpolicy.reporters import BaseReporter

CATALOG = """
backends:
  - backend: deep_gemm
    paths: [dense, moe]
    warmup: true
    requires: {gpu.family: [sm90, sm100, sm120]}
  - backend: cutlass
    paths: [dense]
  - backend: triton
    paths: [dense, moe]
  - backend: marlin
    paths: [moe]
  - backend: linear
    paths: [router]
order:
  - id: order-dense
    path: dense
    backends: [deep_gemm, cutlass, triton]
  - id: order-moe
    path: moe
    backends: [deep_gemm, triton, marlin]
"""
ENGINE = """
engine:
  name: vllm
  moe_flag: {triton: triton, deep_gemm: deep_gemm, marlin: marlin}
  dense_kernels: {deep_gemm: [DeepGemmFp8BlockScaledMMKernel], cutlass: [CutlassFp8BlockScaledMMKernel]}
  env:
    - {name: VLLM_USE_DEEP_GEMM, value: "0", deny: deep_gemm, because: env}
    - {name: VLLM_USE_DEEP_GEMM, value: "1", use: deep_gemm, paths: [dense, moe], because: env}
    - {name: VLLM_MOE_USE_DEEP_GEMM, value: "0", deny: deep_gemm, paths: [moe], because: env}
    - {name: VLLM_DEEP_GEMM_WARMUP, value: skip, deny: deep_gemm, paths: [warmup], because: env}
"""


def policy_of(tmp_path: Path, rules: str, *policies: str) -> kp.Policy:
    files = []
    for i, text in enumerate((CATALOG, ENGINE, rules)):
        p = tmp_path / f"shipped{i}.yaml"
        p.write_text(text)
        files.append(p)
    shipped = [SourceFile(p, p.name, "shipped") for p in files]
    extra = []
    for i, text in enumerate(policies):
        p = tmp_path / f"policy{i}.yaml"
        p.write_text(text)
        extra.append(SourceFile(p, p.name, "policy"))
    return load_files(shipped + extra)


BASE = {"gpu.sm": "sm121", "gpu.family": "sm120", "model.is_moe": True, "model.type": "m"}


def decide(policy: kp.Policy, **facts: object) -> kp.Decision:
    return kp.resolve(Facts.from_values({**BASE, **{k.replace("__", "."): v for k, v in facts.items()}}), policy)


DENY_ACCURACY = """
rules:
  - id: dg-accuracy
    when: {model.type: m}
    deny: deep_gemm
    severity: accuracy
    because: bad numbers
    refs: [x#1]
"""
DENY_CRASH_UNKNOWN = """
rules:
  - id: dg-crash
    when: {gpu.family: sm120, deep_gemm.has_sm120_sf_layout: false}
    deny: deep_gemm
    severity: crash
    because: no SF layout
    refs: [x#2]
"""


class TestCrossPath:
    """A deny without `paths` holds on every path the backend exists on, and in the warmup."""

    def test_unscoped_deny_reaches_every_path(self, tmp_path: Path) -> None:
        d = decide(policy_of(tmp_path, DENY_ACCURACY))
        assert d.paths["dense"].backend == "cutlass"
        assert d.paths["moe"].backend == "triton"
        assert d.warmup == ()
        assert d.paths["dense"].rule == d.paths["moe"].rule == "dg-accuracy"

    def test_warmup_follows_the_paths(self, tmp_path: Path) -> None:
        d = decide(policy_of(tmp_path, "rules: []"), deep_gemm__has_sm120_sf_layout=True)
        assert d.paths["dense"].backend == d.paths["moe"].backend == "deep_gemm"
        assert d.warmup == ("deep_gemm.dense", "deep_gemm.moe")

    def test_path_scoped_deny(self, tmp_path: Path) -> None:
        rules = DENY_ACCURACY.replace("deny: deep_gemm", "deny: deep_gemm\n    paths: [moe]")
        d = decide(policy_of(tmp_path, rules))
        assert (d.paths["dense"].backend, d.paths["moe"].backend) == ("deep_gemm", "triton")
        assert d.warmup == ("deep_gemm.dense",)


class TestUnknownFacts:
    """Crash rules apply when undecidable, with the assumption listed; other rules do not."""

    def test_crash_rule_applies_when_unknown(self, tmp_path: Path) -> None:
        d = decide(policy_of(tmp_path, DENY_CRASH_UNKNOWN))
        assert d.paths["dense"].backend == "cutlass"
        assert [(a.fact, a.rule) for a in d.assumptions] == [("deep_gemm.has_sm120_sf_layout", "dg-crash")] * 1
        known = decide(policy_of(tmp_path, DENY_CRASH_UNKNOWN), deep_gemm__has_sm120_sf_layout=True)
        assert known.paths["dense"].backend == "deep_gemm" and known.assumptions == ()

    def test_non_crash_rule_does_not_apply_when_unknown(self, tmp_path: Path) -> None:
        rules = DENY_ACCURACY.replace("when: {model.type: m}", "when: {model.hidden_size: 4096}")
        d = decide(policy_of(tmp_path, rules))
        assert d.paths["dense"].backend == "deep_gemm"

    def test_requirement_assumed_met_and_listed(self, tmp_path: Path) -> None:
        rules = """
rules:
  - id: triton-new
    backend: triton
    require: {triton.version: ">=3.6"}
    severity: crash
    because: old ptxas
"""
        p = policy_of(tmp_path, DENY_ACCURACY + rules.replace("rules:\n", ""))
        d = decide(p)
        assert d.paths["moe"].backend == "triton"
        assert ("triton.version", "triton-new") in [(a.fact, a.rule) for a in d.assumptions]
        old = decide(p, triton__version="3.5.0")
        assert old.paths["moe"].backend == "marlin"
        assert old.paths["moe"].rules == ("dg-accuracy", "triton-new")


class TestOverrides:
    """Explicit choices beat accuracy/perf/support rules with a warning, a crash rule only when named."""

    def test_env_override_beats_accuracy_on_every_path(self, tmp_path: Path) -> None:
        d = decide(policy_of(tmp_path, DENY_ACCURACY), deploy__env__VLLM_USE_DEEP_GEMM="1")
        assert d.paths["dense"].backend == d.paths["moe"].backend == "deep_gemm"
        assert d.warmup == ("deep_gemm.dense", "deep_gemm.moe")
        assert [o.accepted for o in d.overrides] == [True, True]
        assert any("overrides `dg-accuracy`" in w for w in d.warnings)

    def test_crash_rule_refuses_unless_named(self, tmp_path: Path) -> None:
        p = policy_of(tmp_path, DENY_CRASH_UNKNOWN)
        d = decide(p, deploy__moe_backend="deep_gemm", deep_gemm__has_sm120_sf_layout=False)
        assert d.paths["moe"].backend == "triton"
        assert d.paths["moe"].candidates[0].verdict == "refused"
        assert d.overrides[0].accepted is False and "refused" in d.warnings[0]
        named = decide(
            p,
            deploy__moe_backend="deep_gemm",
            deep_gemm__has_sm120_sf_layout=False,
            deploy__allow_rules=("dg-crash",),
        )
        assert named.paths["moe"].backend == "deep_gemm"

    def test_narrow_env_wins_over_broad_env(self, tmp_path: Path) -> None:
        d = decide(
            policy_of(tmp_path, "rules: []"),
            deploy__env__VLLM_USE_DEEP_GEMM="1",
            deploy__env__VLLM_MOE_USE_DEEP_GEMM="0",
            deep_gemm__has_sm120_sf_layout=True,
        )
        assert (d.paths["dense"].backend, d.paths["moe"].backend) == ("deep_gemm", "triton")

    def test_contradictory_explicit_choices(self, tmp_path: Path) -> None:
        with pytest.raises(kp.ContradictionError, match="contradictory overrides on path `moe`"):
            decide(
                policy_of(tmp_path, "rules: []"),
                deploy__moe_backend="deep_gemm",
                deploy__env__VLLM_USE_DEEP_GEMM="0",
            )

    def test_policy_use_and_user_flag(self, tmp_path: Path) -> None:
        pol = """
rules:
  - id: op-marlin
    use: marlin
    paths: [moe]
    because: validated
"""
        p = policy_of(tmp_path, "rules: []", pol)
        assert decide(p).paths["moe"].backend == "marlin"
        d = decide(p, deploy__moe_backend="triton")
        assert d.paths["moe"].backend == "triton"
        assert any("wins over policy `op-marlin`" in w for w in d.warnings)

    def test_warmup_skip(self, tmp_path: Path) -> None:
        d = decide(
            policy_of(tmp_path, "rules: []"),
            deep_gemm__has_sm120_sf_layout=True,
            deploy__env__VLLM_DEEP_GEMM_WARMUP="skip",
        )
        assert d.paths["dense"].backend == "deep_gemm" and d.warmup == ()
        assert d.engine == {}  # the resolver is engine-free: the flags are rendered at the edge
        flags = engine_flags(d.paths, policy_of(tmp_path, "rules: []").engines["vllm"])
        assert flags["env"]["VLLM_DEEP_GEMM_WARMUP"] == "skip"


def test_prefer_reorders(tmp_path: Path) -> None:
    rules = "rules:\n  - id: p\n    prefer: [marlin]\n    paths: [moe]\n    because: faster\n"
    assert decide(policy_of(tmp_path, rules)).paths["moe"].backend == "marlin"


def test_no_valid_backend(tmp_path: Path) -> None:
    rules = """
rules:
  - id: no-moe
    deny: [deep_gemm, triton, marlin]
    paths: [moe]
    severity: crash
    because: nothing works
    refs: [x#3]
"""
    d = decide(policy_of(tmp_path, rules))
    assert d.paths["moe"].backend is None and not d.ok
    assert d.paths["moe"].reason
    assert all(c.verdict == "rejected" for c in d.paths["moe"].candidates)


def test_dense_model_has_no_moe_path(tmp_path: Path) -> None:
    d = decide(policy_of(tmp_path, "rules: []"), model__is_moe=False)
    assert d.paths["moe"].backend is None and d.paths["moe"].reason == "the model has no MoE layers"
    assert not d.paths["moe"].applicable and d.ok


def test_implications_fill_only_unknown_facts(policy: kp.Policy) -> None:
    f = kp.facts_for(
        gpu="sm120",
        model="RedHatAI/gemma-4-31B-it-FP8-block",
        facts={"vllm.version": "0.24.0"},
        policy=policy,
    )
    d = kp.resolve(f, policy)
    assert d.facts.get("deep_gemm.has_sm120_sf_layout") is False
    assert d.facts.sources["deep_gemm.has_sm120_sf_layout"] == "implied:vllm-0.24-vendors-deep_gemm-891d57b4"
    assert d.paths["dense"].backend == "cutlass"
    f2 = kp.facts_for(
        gpu="sm120",
        model="RedHatAI/gemma-4-31B-it-FP8-block",
        facts={"vllm.version": "0.24.0", "deep_gemm.has_sm120_sf_layout": True},
        policy=policy,
    )
    assert kp.resolve(f2, policy).paths["dense"].backend == "deep_gemm"


def test_external_deep_gemm_blocks_vendored_implication(policy: kp.Policy) -> None:
    f = kp.facts_for(
        gpu="sm120",
        model="RedHatAI/gemma-4-31B-it-FP8-block",
        facts={"vllm.version": "0.24.0", "deep_gemm.source": "external"},
        policy=policy,
    )
    d = kp.resolve(f, policy)
    assert "deep_gemm.commit" not in d.facts


def test_determinism(policy: kp.Policy) -> None:
    f = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", policy=policy)
    a = kp.resolve(f, policy, reporter=BaseReporter())
    b = kp.resolve(
        Facts(values=dict(reversed(list(f.values.items()))), sources=f.sources),
        policy,
        reporter=BaseReporter(),
    )
    assert a.to_json() == b.to_json()
    assert a.fingerprint == b.fingerprint
    assert kp.resolve(f, policy) is kp.resolve(f, policy)  # cached


def test_reporter_sees_every_verdict(policy: kp.Policy) -> None:
    seen: list[tuple[str, str, str]] = []

    class Recorder(BaseReporter):
        def judging(self, path: str, candidate: kp.Candidate) -> None:
            seen.append((path, candidate.backend, candidate.verdict))

    f = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", policy=policy)
    d = kp.resolve(f, policy, reporter=Recorder())
    for path in ("dense", "moe", "router"):
        assert [b for p, b, _ in seen if p == path] == [c.backend for c in d.paths[path].candidates]


class TestSeeds:
    """The three seed cases of docs/design.md."""

    def test_qwen36_on_gb10(self, policy: kp.Policy) -> None:
        d = kp.resolve(kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", policy=policy), policy)
        assert d.paths["dense"].backend == "cutlass"
        assert d.paths["moe"].backend == "triton"
        assert d.paths["router"].backend != "bf16x3"
        assert not any(k.startswith("deep_gemm.") for k in d.warmup)
        dg = next(c for c in d.paths["moe"].candidates if c.backend == "deep_gemm")
        assert dg.rules[0] == "deep_gemm-e8m0-qwen3_5"
        assert {"vllm#37804", "vllm#50332"} <= set(dg.refs)
        rendered = with_engine_flags(d, policy).engine
        assert rendered["vllm"]["env"]["VLLM_USE_DEEP_GEMM"] == "0"
        assert rendered["vllm"]["args"] == ["--moe-backend", "triton"]

    def test_deepseek_v4_router_on_gb10(self, policy: kp.Policy) -> None:
        d = kp.resolve(kp.facts_for(gpu="GB10", model="deepseek-ai/DeepSeek-V4-Flash", policy=policy), policy)
        assert d.ok
        assert d.paths["router"].backend not in ("bf16x3", "linear_fp32")
        bf16x3 = next(c for c in d.paths["router"].candidates if c.backend == "bf16x3")
        assert bf16x3.verdict == "rejected"
        for kernel in d.warmup:
            backend, path = kernel.split(".")
            assert d.paths[path].backend == backend

    @pytest.mark.parametrize("evidence", [{"deep_gemm.has_sm120_sf_layout": False}, {"vllm.version": "0.24.0"}, {}])
    def test_gemma4_without_sm120_sf_layout(self, policy: kp.Policy, evidence: dict[str, object]) -> None:
        f = kp.facts_for(gpu="sm120", model="RedHatAI/gemma-4-31B-it-FP8-block", facts=evidence, policy=policy)
        d = kp.resolve(f, policy)
        assert d.paths["dense"].backend == "cutlass"
        assert d.paths["dense"].rule == "deep_gemm-no-sm120-sf-layout"
        assert not d.paths["moe"].applicable and not d.paths["router"].applicable
        assert d.warmup == ()

    def test_gemma4_with_sm120_sf_layout(self, policy: kp.Policy) -> None:
        f = kp.facts_for(
            gpu="sm120",
            model="RedHatAI/gemma-4-31B-it-FP8-block",
            facts={"vllm.version": "0.26.0"},
            policy=policy,
        )
        d = kp.resolve(f, policy)
        assert d.paths["dense"].backend == "deep_gemm"
        assert d.warmup == ("deep_gemm.dense",)


def test_opt_in_backend_only_on_request(tmp_path: Path) -> None:
    """An `auto: false` backend is never chosen on its own, even when nothing else is valid."""
    rules = """
rules:
  - id: nothing-else
    deny: [deep_gemm, triton, marlin]
    paths: [moe]
    severity: crash
    because: test
    refs: [t#1]
"""
    policy_of(tmp_path, rules)  # writes the catalog, engine and rule files
    opt = tmp_path / "optin.yaml"
    opt.write_text("backends:\n  - backend: flashinfer_b12x\n    paths: [moe]\n    auto: false\n")
    files = [SourceFile(tmp_path / f"shipped{i}.yaml", f"shipped{i}.yaml", "shipped") for i in range(3)]
    p = load_files([*files, SourceFile(opt, "optin.yaml", "shipped")])
    auto = decide(p)
    assert auto.paths["moe"].backend is None
    b12x = next(c for c in auto.paths["moe"].candidates if c.backend == "flashinfer_b12x")
    assert b12x.reason == "chosen only when the deployment asks for it explicitly"
    asked = decide(p, deploy__moe_backend="flashinfer_b12x")
    assert asked.paths["moe"].backend == "flashinfer_b12x"


@pytest.mark.parametrize("commit", ["891d57b", "891d57b4", "891D57B4DB1071624B5C8FA0D1E51CB317FA709F"])
def test_a_deep_gemm_commit_matches_whatever_its_length(policy: kp.Policy, commit: str) -> None:
    # an external build names its commit in its local version (`2.1.0+891d57b`: 7 digits) while
    # the rules cite 8: both are the commit's first 7 hex digits
    f = Facts.from_values({"gpu.sm": "sm120", "deep_gemm.source": "external", "deep_gemm.commit": commit})
    d = kp.resolve(f, policy)
    assert d.facts.values["deep_gemm.commit"] == "891d57b"
    assert d.facts.sources["deep_gemm.has_sm120_sf_layout"] == "implied:deep_gemm-891d57b4-no-sm120"


def test_a_deep_gemm_commit_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FactError, match="`v2.1` is not a git commit"):
        Facts.from_values({"deep_gemm.commit": "v2.1"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("implies:\n  - id: x\n    when: {deep_gemm.commit: main}\n    set: {deep_gemm.version: '1.0'}\n")
    with pytest.raises(PolicyError, match="`main` is not a git commit"):
        kp.load_policy([bad], environ=False)


def test_equal_values_with_other_sources_are_other_facts(policy: kp.Policy) -> None:
    """Facts equality and the resolver's cache see the sources: a decision reports where each
    fact came from, so one resolved from `user` facts must not come back for `spec` facts."""
    values = {"gpu.sm": "sm121", "model.type": "qwen3_5_moe_text", "quant.scheme": "fp8_block"}
    spec = Facts.from_values(values, source="spec")
    user = Facts.from_values(values, source="user")
    assert spec != user and hash(spec) == hash(user)
    assert spec == Facts.from_values(dict(values), source="spec")
    first = kp.resolve(spec, policy)
    second = kp.resolve(user, policy)
    assert first.facts.sources["gpu.sm"] == "spec"
    assert second.facts.sources["gpu.sm"] == "user"
    assert second.to_dict()["sources"]["model.type"] == "user"
    assert first.fingerprint == second.fingerprint  # the fingerprint hashes values, not sources
