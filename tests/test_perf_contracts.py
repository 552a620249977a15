"""Contracts behind the performance figures (no timings here: benchmarks/ prints those).

- ``import kernelpolicy`` and a whole decision never import torch, triton or vLLM, nor pydantic
  once the rules' compiled cache is written (pydantic checks rule files when they compile);
- the peer encodings of benchmarks/peers.py (Cedar, CEL) compute the same MoE backend as
  kernelpolicy, so the comparison it prints is between equal answers.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import kernelpolicy as kp

ROOT = Path(__file__).resolve().parent.parent

_HEAVY_IMPORT_PROBE = """
import sys

HEAVY = tuple(sys.argv[1:])
seen = []

class Spy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            seen.append(name)
        return None

sys.meta_path.insert(0, Spy())
import kernelpolicy as kp
policy = kp.load_policy(environ=False)
facts = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", policy=policy)
decision = kp.resolve(facts, policy)
decision.to_json()
print(sorted(set(seen)) or "none")
"""


def _imported_while_deciding(*packages: str) -> str:
    # a fresh interpreter: the test session itself may have imported anything
    out = subprocess.run(
        [sys.executable, "-c", _HEAVY_IMPORT_PROBE, *packages], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return out.stdout.strip()


def test_import_and_decision_never_import_torch_triton_or_vllm() -> None:
    seen = _imported_while_deciding("torch", "triton", "vllm")
    assert seen == "none", f"imported while deciding: {seen}"


def test_a_decision_from_the_compiled_rules_never_imports_pydantic() -> None:
    _imported_while_deciding("pydantic")  # compiles the rules into the cache if they are not yet
    seen = _imported_while_deciding("pydantic", "pydantic_core")
    assert seen == "none", f"imported while deciding: {seen}"


def _peers():  # type: ignore[no-untyped-def]
    missing = [m for m in ("cedarpy", "cel") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (pip install -e '.[peers]')")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import peers
    finally:
        sys.path.pop(0)
    return peers


@pytest.fixture(scope="module")
def engines(policy: kp.Policy):  # type: ignore[no-untyped-def]
    """Every catalog GPU x every 6th catalog MoE model x every software stack of peers.py."""
    return _peers().prepare(policy, model_step=6)


def test_cedar_and_cel_choose_the_moe_backend_kernelpolicy_chooses(engines) -> None:  # type: ignore[no-untyped-def]
    peers = _peers()
    chosen = {engines.kernelpolicy(i) for i in range(len(engines.cells))}
    assert len(chosen) >= 4, f"the domain hardly varies the outcome: {chosen}"
    assert peers.disagreements(engines) == []


def test_the_peer_comparison_detects_a_dropped_rule(policy: kp.Policy, engines) -> None:  # type: ignore[no-untyped-def]
    """Encodings built without a rule that decided some cell disagree with kernelpolicy there."""
    import dataclasses

    peers = _peers()
    deciding = (
        rule for f in engines.cells for rule in kp.resolve(f, policy).paths["moe"].rules if rule in policy.by_id
    )
    target = next(deciding)
    weaker = dataclasses.replace(policy, rules=tuple(r for r in policy.rules if r.id != target))
    other = peers.prepare(weaker, cells=engines.cells)
    other.policy = policy  # judged against the shipped decision
    assert peers.disagreements(other), f"dropping `{target}` changed nothing the peers compute"
