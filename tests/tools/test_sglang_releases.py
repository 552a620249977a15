"""SGLang's per-release pins: the rule file generated from them and what it implies."""

from __future__ import annotations

from pathlib import Path

import kernelpolicy as kp
from kernelpolicy.adapters.sglang._generate import GENERATED, generated_files, release_implications
from kernelpolicy.adapters.sglang._versions import release_records
from kernelpolicy.facts.record import Facts
from kernelpolicy.resolver import apply_implications

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_rule_file_is_in_sync_with_the_data() -> None:
    want = generated_files(release_records(), ROOT)[ROOT / GENERATED]
    assert (ROOT / GENERATED).read_text(encoding="utf-8") == want, (
        f"{GENERATED} is out of date: run `python -m kernelpolicy._docs`"
    )


def test_every_scanned_release_implies_its_pins(policy: kp.Policy) -> None:
    for version, record in release_records().items():
        facts = apply_implications(Facts.from_values({"deploy.engine": "sglang", "sglang.version": version}), policy)
        pins = record["requires"]
        assert facts.get("flashinfer.version") == pins["flashinfer-python"], version
        assert facts.get("deep_gemm.version") == pins["sgl-deep-gemm"], version
        assert facts.get("deep_gemm.dist") == "sgl-deep-gemm", version
        assert facts.get("torch.version") == pins["torch"], version
        assert facts.get("humming.version") == pins.get("humming-kernels"), version


def test_a_release_after_the_newest_scanned_one_implies_nothing_and_vllm_none(policy: kp.Policy) -> None:
    later = apply_implications(Facts.from_values({"deploy.engine": "sglang", "sglang.version": "0.5.24"}), policy)
    assert later.get("deep_gemm.version") is None and later.get("flashinfer.version") is None
    vllm = apply_implications(Facts.from_values({"deploy.engine": "vllm", "sglang.version": "0.5.23"}), policy)
    assert vllm.get("deep_gemm.dist") is None


def test_another_deep_gemm_or_none_keeps_sglangs_pin_out(policy: kp.Policy) -> None:
    given = {"deploy.engine": "sglang", "sglang.version": "0.5.15"}
    none = apply_implications(Facts.from_values({**given, "deep_gemm.source": "none"}), policy)
    assert none.get("deep_gemm.version") is None and none.get("flashinfer.version") is None
    other = apply_implications(Facts.from_values({**given, "deep_gemm.dist": "deep-gemm"}), policy)
    assert other.get("deep_gemm.version") is None


def test_releases_that_pin_the_same_share_one_entry() -> None:
    ids = [e["id"] for e in release_implications(release_records())["implies"]]
    assert "sglang-0.5.13-0.5.13.post1-pins" in ids and "sglang-0.5.20-0.5.21-pins" in ids
    assert len(ids) < len(release_records())
