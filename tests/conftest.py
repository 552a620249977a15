from __future__ import annotations

import pytest

import kernelpolicy as kp


@pytest.fixture(scope="session")
def policy() -> kp.Policy:
    """The shipped rules and default policy, without $KERNELPOLICY_POLICY."""
    return kp.load_policy(environ=False)


@pytest.fixture(autouse=True)
def _no_hugging_face_hub(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches the Hugging Face Hub or reads the developer's cache (tests/models/ opt in)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.getbasetemp() / "empty-hf-cache"))
    for name in ("HF_ENDPOINT", "HF_TOKEN", "HF_HOME"):
        monkeypatch.delenv(name, raising=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``last`` run after every other: scripts/test.sh computes the exhaustive proof
    in the background while the suite runs, and such a test waits for it (the certificate's lock)."""
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)
