"""Where kernelpolicy's files live: the shipped rules, the default policy, and the one cache folder.

Every cache kernelpolicy writes (compiled policies, machine facts, vLLM test environments and
stubs) lives under :func:`cache_root`: ``$KERNELPOLICY_CACHE_DIR``, else the platform's user
cache folder (``$XDG_CACHE_HOME/kernelpolicy``, ``~/.cache/kernelpolicy`` on Linux). The
variables of earlier releases (``KERNELPOLICY_CACHE``, ``KERNELPOLICY_VENV_CACHE``) are still
read, with a deprecation warning.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Final

__all__ = [
    "CACHE_ENV",
    "DEPRECATED_CACHE_ENV",
    "cache_root",
    "cache_subdir",
    "default_policy_dir",
    "expand_user",
    "shipped_rules_dir",
]

_PKG = Path(__file__).resolve().parent

#: The one variable naming kernelpolicy's cache folder.
CACHE_ENV: Final = "KERNELPOLICY_CACHE_DIR"
#: Variables of earlier releases, still read (with a warning): name -> the sub-folder it named.
DEPRECATED_CACHE_ENV: Final[Mapping[str, str]] = {"KERNELPOLICY_CACHE": "", "KERNELPOLICY_VENV_CACHE": "venvs"}


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


def expand_user(text: str) -> Path:
    """``~`` and ``~user`` expanded; a user that does not exist leaves the path as written."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # `~nouser/x`: no such user, so no such home folder
        return Path(text)


def _user_cache_base(env: Mapping[str, str]) -> Path:
    """The platform's user cache folder."""
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg.strip() and Path(xdg).is_absolute():  # the XDG spec: a relative value is ignored
        return Path(xdg)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if sys.platform == "win32" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"])
    return Path.home() / ".cache"


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """kernelpolicy's cache folder (``$KERNELPOLICY_CACHE_DIR``, else the user cache folder)."""
    env = os.environ if env is None else env
    named = env.get(CACHE_ENV, "")
    if named.strip():
        folder = expand_user(named)
        if folder.is_absolute():  # blank, relative or `~nouser/x`: not a folder to create in the cwd
            return folder
    return _user_cache_base(env) / "kernelpolicy"


def cache_subdir(name: str, env: Mapping[str, str] | None = None) -> Path:
    """The folder of one cache (``policies``, ``venvs``, ...) under :func:`cache_root`.

    A deprecated variable that named this cache is honoured when ``KERNELPOLICY_CACHE_DIR`` is
    not set, with a :class:`FutureWarning`.
    """
    env = os.environ if env is None else env
    if not env.get(CACHE_ENV):
        for var, sub in DEPRECATED_CACHE_ENV.items():
            if env.get(var) and sub in (name, ""):
                base = expand_user(env[var])
                usable = env[var].strip() and base.is_absolute()  # as KERNELPOLICY_CACHE_DIR: no folder in the cwd
                warnings.warn(
                    f"`{var}` is deprecated: set `{CACHE_ENV}` (the folder of every kernelpolicy cache)"
                    + ("" if usable else f"; its value `{env[var][:40]}` is not an absolute folder: ignored"),
                    FutureWarning,  # shown to users, unlike DeprecationWarning
                    stacklevel=2,
                )
                if not usable:
                    break
                return base if sub else base / name
    return cache_root(env) / name
