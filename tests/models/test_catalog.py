"""The shipped model catalog: the checkpoints people run, each with the source of its facts."""

from __future__ import annotations

import pytest

import kernelpolicy as kp
from kernelpolicy.facts.model import CatalogModel
from kernelpolicy.facts.quant import config_facts


def test_catalog_covers_the_checkpoints_people_run(policy: kp.Policy) -> None:
    assert len(policy.models) >= 40
    families = {"Qwen/Qwen3", "deepseek-ai/", "openai/gpt-oss", "Llama-4", "gemma", "Kimi-K2", "GLM-4", "MiniMax-M2"}
    ids = [m.id for m in policy.models]
    assert {f for f in families if any(f in i for i in ids)} == families


def test_ids_are_unique_ignoring_case(policy: kp.Policy) -> None:
    ids = [m.id.lower() for m in policy.models]
    assert len(ids) == len(set(ids))


_MODELS = kp.load_policy(environ=False).models


@pytest.mark.parametrize("m", _MODELS, ids=[m.id for m in _MODELS])
def test_entry_cites_its_repo_and_parses(m: CatalogModel) -> None:
    assert m.source.startswith(f"https://huggingface.co/{m.id}/"), m.id
    facts = config_facts(m.config, file=m.id)
    assert facts.get("quant.method_known") is True, m.id
    assert facts.get("model.type"), m.id
