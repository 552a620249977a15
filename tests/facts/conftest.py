"""Fixtures for the machine-facts tests (see machine_fakes.py): no GPU or driver needed."""

from __future__ import annotations

from machine_fakes import (  # noqa: F401
    h200_packages,
    h200_runs,
    no_packages,
    pynvml_mod,
    replay_h200,
)
