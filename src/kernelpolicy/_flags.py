"""kernelpolicy's own on/off environment variables, read one way everywhere.

``KERNELPOLICY_DEBUG``, ``KERNELPOLICY_STRICT`` and ``KERNELPOLICY_DISABLE`` are on for ``1``,
``true``, ``yes`` or ``on`` and off for ``0``, ``false``, ``no``, ``off`` or nothing (any case,
blanks around ignored). Any other value (``2``, ``enabled``, ``maybe``) is not read as either:
:func:`env_flag` raises, so the caller says so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .errors import UsageError

__all__ = ["FALSE", "TRUE", "env_flag"]

TRUE: Final = frozenset({"1", "true", "yes", "on"})
FALSE: Final = frozenset({"", "0", "false", "no", "off"})


def env_flag(environ: Mapping[str, str], name: str) -> bool:
    """Whether the on/off variable *name* is on in *environ*.

    :raises UsageError: for a value that is neither (naming the variable and the value).
    """
    raw = environ.get(name, "")
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise UsageError(f"{name}=`{raw[:40]!r}`: expected 1 or 0 (true/false, yes/no, on/off)")
