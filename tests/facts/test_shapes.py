"""Layer-shape facts: the per-rank MoE width and its alignment class, derived when facts are assembled."""

from __future__ import annotations

import pytest

from kernelpolicy import load_policy
from kernelpolicy.deployment._shapes import align_class, moe_intermediate_per_rank, shape_facts
from kernelpolicy.deployment.pipeline import build_facts
from kernelpolicy.facts import FACT_KEYS
from kernelpolicy.facts.record import Facts


@pytest.mark.parametrize(
    ("n", "want"),
    [(704, "64"), (176, "16"), (192, "64"), (1536, "128"), (96, "32"), (88, "other"), (0, "other")],
)
def test_align_class(n: int, want: str) -> None:
    assert align_class(n) == want
    assert want in FACT_KEYS["deploy.moe_intermediate_align"].domain


@pytest.mark.parametrize(
    ("width", "tp", "ep", "want"),
    [
        (704, 4, 1, 176),  # Gemma-4-26B-A4B at TP4: experts split four ways
        (704, 4, 4, 704),  # vLLM's expert parallelism keeps each expert whole
        (1536, 8, 2, 384),  # SGLang --tp-size 8 --ep-size 2: four ranks per expert
        (704, 3, 1, None),  # an uneven split is not a shape kernelpolicy guesses
        (704, 0, 1, None),
    ],
)
def test_moe_intermediate_per_rank(width: int, tp: int, ep: int, want: int | None) -> None:
    assert moe_intermediate_per_rank(width, tp, ep) == want


def test_shape_facts_only_for_moe_models_and_never_over_a_stated_fact() -> None:
    moe = {"model.is_moe": True, "model.intermediate_size": 704, "deploy.tp": 4, "deploy.ep": 1}
    assert shape_facts(moe) == {"deploy.moe_intermediate_per_rank": 176, "deploy.moe_intermediate_align": "16"}
    assert shape_facts({**moe, "model.is_moe": False}) == {}
    assert shape_facts({**moe, "deploy.moe_intermediate_align": "64"}) == {"deploy.moe_intermediate_per_rank": 176}
    assert shape_facts({**moe, "deploy.moe_intermediate_per_rank": 128}) == {"deploy.moe_intermediate_align": "128"}


def test_build_facts_derives_the_shape_with_the_width_source() -> None:
    policy = load_policy()
    derived = Facts.from_values({"model.is_moe": True, "model.intermediate_size": 704}, source="config.json")
    built = build_facts(policy, derived=derived, facts={"deploy.tp": 4}).facts
    assert built.get("deploy.moe_intermediate_per_rank") == 176
    assert built.get("deploy.moe_intermediate_align") == "16"
    assert built.sources["deploy.moe_intermediate_align"] == "config.json"
    # the default TP of 1 keeps the whole width; a value the user states is kept
    assert build_facts(policy, derived=derived).facts.get("deploy.moe_intermediate_align") == "64"
    kept = build_facts(policy, derived=derived, facts={"deploy.moe_intermediate_align": "128"}).facts
    assert kept.get("deploy.moe_intermediate_align") == "128"
