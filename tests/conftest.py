from __future__ import annotations

import os
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
def _own_certificates(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Certificates the suite's checks write go to a folder of the session's, not the user's
    cache (the folder keeps the newest twelve: the suite's small proofs would push out the
    user's). A test that sets its own cache folder keeps it."""
    from kernelpolicy.analysis import certificate

    real = certificate.folder
    mine = tmp_path_factory.getbasetemp() / "certificates"

    def folder() -> Path:
        return real() if os.environ.get("KERNELPOLICY_CACHE_DIR") != _CACHE_ENV else mine

    monkeypatch.setattr(certificate, "folder", folder)
