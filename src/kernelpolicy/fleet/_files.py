"""``kernelpolicy fleet --from``: nodes from ``kernelpolicy facts --json`` files (or the
``vllm collect-env`` / ``sglang.check_env`` reports engine issues carry), decided here.

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
from ..facts.env_report import EnvReport
from . import NodeAnswer, answer_from_payload

__all__ = ["MAX_BYTES", "answers_from_files"]

#: The largest facts file read (``kernelpolicy facts --json --probe`` writes a few kB).
MAX_BYTES: Final = 4_000_000


def _read(name: str) -> dict[str, Any] | EnvReport:
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
        from ..facts.env_report import ReportError, read_env_report

        if not text.lstrip().startswith(("{", "[")):  # not JSON at all: an engine's environment report?
            try:
                return read_env_report(text)
            except ReportError:
                pass
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
        if str(key).startswith(_DEPLOYMENT):
            raise UsageError(
                f"`{name}`: fact `{key}`: a fact of the deployment, not of a machine (`kernelpolicy facts --json`"
                " never records one): give it to every node with `fleet --fact` or `--env`"
            )
        if lookup_key(str(key)) is None:
            raise UsageError(f"`{name}`: fact `{key}`: unknown fact key")
        if value is None:
            raise UsageError(f"`{name}`: fact `{key}`: `null` is not a value")
        try:
            normalise_value(str(key), value)
        except FactError as exc:
            raise UsageError(f"`{name}`: {exc}") from None


#: The facts a node file may not carry: the deployment's (the backends asked for, the rules
#: allowed, environment variables), which ``--fact``/``--env`` give for every node at once.
_DEPLOYMENT: Final = "deploy."


def _same_gpu(data: Mapping[str, Any], values: Mapping[str, Any], name: str) -> None:
    """The file's ``gpu`` block (shown in ``--json``) describes the GPU its facts describe (decided)."""
    gpu = data.get("gpu")
    if gpu is None:
        return
    if not isinstance(gpu, Mapping):
        raise UsageError(f"`{name}`: `gpu` is not the output of `kernelpolicy facts --json` (an object or null)")
    for field, key in (("name", "gpu.name"), ("sm", "gpu.sm"), ("cc", "gpu.cc"), ("count", "gpu.count")):
        said, fact = gpu.get(field), values.get(key)
        if said is not None and fact is not None and str(said) != str(fact):
            raise UsageError(
                f"`{name}`: its `gpu` block says {field} `{said}`, its fact `{key}` says `{fact}`:"
                " one machine has one GPU"
            )


def _same_host(values: Mapping[str, Any], products: Any, name: str) -> None:
    """The file's ``host.machine`` is the host its GPU comes on (a GB10 is on aarch64), as a
    machine's own ``facts --json`` records it. (Only here: a simulated GPU of the engines' tests
    runs on any host, so ``explain`` and the plugins do not require it.)"""
    from ..errors import UnknownGPUError
    from ..facts.gpu import facts_from_spec

    gpu, host = values.get("gpu.name"), values.get("host.machine")
    if not isinstance(gpu, str) or not isinstance(host, str):
        return
    try:
        implied = facts_from_spec(gpu, products).get("host.machine")
    except UnknownGPUError:  # a GPU the catalog does not name: no host to compare
        return
    if implied is not None and host != implied:
        raise UsageError(
            f"`{name}`: fact `host.machine` `{host}` contradicts fact `gpu.name` `{gpu}`"
            f" (it is on an {implied} host): not one machine's facts"
        )


def _from_report(report: EnvReport, products: Any, name: str) -> dict[str, Any]:
    """A report as the ``facts --json`` of its machine: the facts of its GPU's spec, then what
    the report says (its engine variables are the deployment's: give them with ``fleet --env``).

    :raises UsageError: the report names no GPU, or one the catalog does not know.
    """
    from ..errors import UnknownGPUError
    from ..facts.gpu import facts_from_spec
    from ..facts.machine import SCHEMA

    if report.gpu is None:
        raise UsageError(f"`{name}`: the {report.kind} report names no GPU")
    try:
        spec = facts_from_spec(report.gpu, products)
    except UnknownGPUError as exc:
        raise UsageError(f"`{name}`: {exc}") from None
    values = {**spec, **report.values}
    return {
        "schema": SCHEMA,
        "facts": values,
        "sources": {k: "report" if k in report.values else "spec" for k in values},
        "notes": [f"from a {report.kind} report"],
    }


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
        read = _read(name)
        data = _from_report(read, shared.policy.gpus, name) if isinstance(read, EnvReport) else read
        machine = machine_from_json(data, name)
        _checked(machine.values, name)
        _same_gpu(data, machine.values, name)
        _same_host(machine.values, shared.policy.gpus, name)
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
