"""Hostile input: every test runs with its own cache folder and no operator policy from the shell."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

#: The hostile suites' shared hypothesis settings: bounded for CI, derandomised (a failure is
#: seen again on the next run); ``KERNELPOLICY_PROPERTY_EXAMPLES`` raises it for a longer hunt.
SETTINGS = settings(
    max_examples=int(os.environ.get("KERNELPOLICY_PROPERTY_EXAMPLES", "50")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=os.environ.get("KERNELPOLICY_PROPERTY_RANDOM", "") in ("", "0"),
    database=None,
)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(cache))
    for name in ("KERNELPOLICY_POLICY", "KERNELPOLICY_NO_CACHE", "KERNELPOLICY_FACTS", "KERNELPOLICY_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return cache


@pytest.fixture
def cache_root(_own_cache: Path) -> Path:
    return _own_cache
