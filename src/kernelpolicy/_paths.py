"""Where the shipped rules and the default policy live (in a wheel, or in a source checkout)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["default_policy_dir", "shipped_rules_dir"]

_PKG = Path(__file__).resolve().parent


@cache
def _data_dir(name: str) -> Path:
    packaged = _PKG / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PKG.parent.parent / name  # src/kernelpolicy -> repo root


def shipped_rules_dir() -> Path:
    """The folder of shipped rule tables (``rules/`` of the source tree)."""
    return _data_dir("rules")


def default_policy_dir() -> Path:
    """The folder of the default operator policy (``policy/`` of the source tree)."""
    return _data_dir("policy")
