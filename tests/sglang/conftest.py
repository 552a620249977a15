"""Fixtures for the integration tests against real SGLang releases (``-m sglang``).

The releases are those of ``tests/sglang/releases.txt``; their venvs come from
``scripts/sglang-venv.sh VERSION``; point at others with ``KERNELPOLICY_SGLANG_0523_PYTHON``
(the version's digits).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kernelpolicy._venvs import MARKER
from kernelpolicy.engines.sglang.testing import default_venv_python

ROOT = Path(__file__).resolve().parents[2]
_LISTED = (ROOT / "tests" / "sglang" / "releases.txt").read_text(encoding="utf-8").splitlines()
#: release -> the variable naming its venv's python (scripts/test.sh exports it)
_ENV = {
    v: f"KERNELPOLICY_SGLANG_{re.sub(r'[^0-9]', '', v)}_PYTHON"
    for v in (line.strip() for line in _LISTED)
    if v and not v.startswith("#")
}
#: The releases the integration tests run against (scripts/test.sh builds their venvs).
RELEASES = tuple(_ENV)


def venv_python(version: str) -> Path:
    override = os.environ.get(_ENV[version])
    python = Path(override) if override else default_venv_python(version)
    built = override or (python.parents[1] / MARKER).is_file()  # a venv still being built is not one
    if not python.is_file() or not built:
        pytest.skip(
            f"no SGLang {version} venv at {python}: run `scripts/sglang-venv.sh {version}` or set {_ENV[version]}"
        )
    return python
