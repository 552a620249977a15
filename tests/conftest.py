from __future__ import annotations

import pytest

import kernelpolicy as kp


@pytest.fixture(scope="session")
def policy() -> kp.Policy:
    """The shipped rules and default policy, without $KERNELPOLICY_POLICY."""
    return kp.load_policy(environ=False)
