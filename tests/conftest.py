from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

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


_CACHE_ENV = os.environ.get("KERNELPOLICY_CACHE_DIR")


@pytest.fixture(autouse=True)
def _own_certificates(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Certificates the suite's checks write go to a folder of the session's, not the user's
    cache: the folder keeps the newest twelve, and the suite's small proofs would push out the
    exhaustive one scripts/test.sh computes for the test marked ``last`` (which reads the real
    folder). A test that sets its own cache folder keeps it."""
    if request.node.get_closest_marker("last") is not None:
        yield
        return
    from kernelpolicy.analysis import certificate

    real = certificate.folder
    mine = tmp_path_factory.getbasetemp() / "certificates"

    def folder() -> Path:
        return real() if os.environ.get("KERNELPOLICY_CACHE_DIR") != _CACHE_ENV else mine

    monkeypatch.setattr(certificate, "folder", folder)
    yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``last`` run after every other: scripts/test.sh computes the exhaustive proof
    in the background while the suite runs, and such a test waits for it (the certificate's lock)."""
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)
