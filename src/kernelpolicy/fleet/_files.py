"""``kernelpolicy fleet --from``: nodes from ``kernelpolicy facts --json`` files, decided here.

Each file is read with a bound (a FIFO, ``/dev/zero`` or a folder is refused at once, a file
larger than :data:`MAX_BYTES` too), parsed as JSON with its nesting and numbers guarded, and
every fact it records is checked against the vocabulary: a value ``explain`` would refuse
(``gpu.sm: sm999``, ``null``, an unknown key) is an error naming the file and the fact, never
dropped. A file of a machine with no GPU is that node's row (``error: no NVIDIA GPU``, exit 4),
never an ``ok`` decision. The policy and the deployment's facts are read once for all files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .._files import ReadError, read_bounded
from ..errors import FactError, UsageError
from . import NodeAnswer, answer_from_payload

__all__ = ["MAX_BYTES", "answers_from_files"]

#: The largest facts file read (``kernelpolicy facts --json --probe`` writes a few kB).
MAX_BYTES: Final = 4_000_000


def _read(name: str) -> dict[str, Any]:
    try:
        raw = read_bounded(name, MAX_BYTES)
    except ReadError as exc:
        raise UsageError(f"`{name}`: cannot read it: {exc.reason}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"`{name}`: cannot read it: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"`{name}`:{exc.lineno}:{exc.colno}: not JSON: {exc.msg.lower()}") from None
    except RecursionError:
        raise UsageError(f"`{name}`: not JSON kernelpolicy reads: nested too deeply") from None
    except ValueError:  # an integer of more digits than Python converts
        raise UsageError(f"`{name}`: not JSON kernelpolicy reads: a number too large") from None
    if not isinstance(data, dict):
        raise UsageError(f"`{name}`: not the output of `kernelpolicy facts --json` (a JSON object)")
    return data


def _checked(values: Mapping[str, Any], name: str) -> None:
    """Every recorded fact is a fact key with a valid value (as ``explain`` reads it)."""
    from ..facts.keys import lookup_key
    from ..facts.record import normalise_value

    for key, value in values.items():
        if lookup_key(str(key)) is None:
            raise UsageError(f"`{name}`: fact `{key}`: unknown fact key")
        if value is None:
            raise UsageError(f"`{name}`: fact `{key}`: `null` is not a value")
        try:
            normalise_value(str(key), value)
        except FactError as exc:
            raise UsageError(f"`{name}`: {exc}") from None


def answers_from_files(files: list[str], request: Mapping[str, Any]) -> tuple[dict[str, Any], list[NodeAnswer]]:
    """The cluster description and one row per facts file in *files*.

    :raises UsageError: naming the file, for a file that cannot be read or holds a bad fact.
    """
    from ._node import Deciding, NoGpuError, decide, machine_from_json

    shared = Deciding(
        model=str(request["model"]),
        environ=None,
        facts=request["facts"],
        env=request["env"],
        policy_paths=[str(p) for p in request.get("policy_paths") or ()],
    )
    rows = []
    for name in files:
        data = _read(name)
        machine = machine_from_json(data, name)
        _checked(machine.values, name)
        extra = {"gpu": data.get("gpu"), "gpu_reason": data.get("gpu_reason")}
        try:
            payload = decide(machine, model=str(request["model"]), environ=None, shared=shared)
        except NoGpuError as exc:
            rows.append(answer_from_payload(name, None, {"status": "error", "error": str(exc), **extra}))
            continue
        except FactError as exc:  # the file's facts (a policy or model problem is not the file's)
            raise UsageError(f"`{name}`: {exc}") from None
        rows.append(answer_from_payload(name, None, {**payload, **extra}))
    return {"source": f"{len(files)} facts file(s)"}, rows
