"""What one node answers: its facts and the decision its own policy files and environment give.

Runs on the node (inside the fleet task) and, for ``kernelpolicy fleet --from``, on facts
files collected by other means. The answer is plain JSON, so no kernelpolicy object crosses
between versions. The facts are those of ``kernelpolicy facts`` (:func:`kernelpolicy.facts.machine.gather`)
beneath the deployment's (the model, the environment variables rules read,
``KERNELPOLICY_FACTS``, explicit ``--fact``/``--env``), exactly as ``explain --gpu auto`` layers them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from .._version import __version__
from ..errors import KernelPolicyError, UsageError
from ..facts.keys import PATHS

__all__ = ["Deciding", "NoGpuError", "decide", "machine_from_json", "node_payload"]


def machine_from_json(data: Mapping[str, Any], where: str) -> Any:
    """A :class:`~kernelpolicy.facts.machine.MachineFacts` from ``kernelpolicy facts --json`` output.

    :raises UsageError: naming *where* when *data* is not that schema.
    """
    from ..facts.machine import SCHEMA, MachineFacts

    if data.get("schema") != SCHEMA or not isinstance(data.get("facts"), Mapping):
        raise UsageError(f"`{where}`: not the output of `kernelpolicy facts --json` (schema `{SCHEMA}`)")
    sources = data.get("sources")
    notes = data.get("notes")
    return MachineFacts(
        values=dict(data["facts"]),
        sources={str(k): str(v) for k, v in sources.items()} if isinstance(sources, Mapping) else {},
        notes=tuple(str(n) for n in notes) if isinstance(notes, list) else (),
        gpu=None,
        gpu_reason=str(data.get("gpu_reason") or ""),
    )


def _path(p: Any) -> dict[str, Any]:
    if p.kernels is not None:
        return {"kernels": list(p.kernels)}
    out: dict[str, Any] = {"backend": p.backend, "present": bool(p.applicable)}
    if p.rule:
        out["rule"] = p.rule
    if p.reason and p.backend is None:
        out["reason"] = p.reason
    return out


class NoGpuError(UsageError):
    """A node (or facts file) with no NVIDIA GPU: there is no decision to make for it."""


class Deciding:
    """What every node's decision shares when they are decided in one process (``--from``): the
    policy, its operator files, and the deployment's facts (read once, not once per file)."""

    def __init__(
        self,
        *,
        model: str,
        environ: Mapping[str, str] | None,
        facts: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        policy_paths: Sequence[str] = (),
        sent: Sequence[tuple[str, str]] = (),
    ) -> None:
        from pathlib import Path

        from ..deployment import facts_for
        from ..dsl.loader import SourceFile, discover, load_files

        # rules/, policy/, $KERNELPOLICY_POLICY's files, then `fleet --policy`'s: named here
        # (*policy_paths*), or *sent* as (this node's copy, the name the driver gave), loaded
        # under that name so that every node's policy digest, and fingerprint, is the driver's
        files = discover(list(policy_paths))
        files += [SourceFile(Path(copy), name, "policy") for copy, name in sent]
        self.policy = load_files(files)
        self.files = [s.display for s in files if s.layer != "shipped"]
        self.deployment = facts_for(model=model, facts=facts, env=env, policy=self.policy, environ=environ)


def decide(
    machine: Any,
    *,
    model: str,
    environ: Mapping[str, str] | None,
    facts: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    shared: Deciding | None = None,
    sent: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The ``ok`` answer for *machine*'s facts and *model*, under the policy this process loads.

    :param environ: the node's environment (``None`` for a facts file: it recorded none).
    :param shared: the policy and deployment facts already read (the same for every file).
    :param sent: ``fleet --policy`` files as (this node's copy, the driver's name), loaded on
        top of this process's own.
    :raises KernelPolicyError: bad input (a policy file, ``KERNELPOLICY_FACTS``, the model, GPU
        facts that contradict each other, as ``explain`` refuses them).
    :raises NoGpuError: the machine has no GPU (``explain --gpu auto`` refuses it too).
    """
    from ..deployment.build import on_machine
    from ..dsl.loader import POLICY_ENV
    from ..facts.machine import to_facts
    from ..resolver import resolve

    shared = shared or Deciding(model=model, environ=environ, facts=facts, env=env, sent=sent)
    policy = shared.policy
    machine_facts = to_facts(machine)
    if machine_facts.merged(shared.deployment).get("gpu.sm") is None:
        raise NoGpuError(f"no NVIDIA GPU: {machine.gpu_reason or 'the facts name none'}")
    merged = on_machine(machine_facts, shared.deployment, policy)  # as `explain --gpu auto` layers them
    decision = resolve(merged, policy)
    files = shared.files
    return {
        "status": "ok",
        "kernelpolicy": __version__,
        "facts": decision.facts.to_json_dict(),
        "sources": dict(sorted(decision.facts.sources.items())),
        "notes": list(machine.notes),
        "policy": {"digest": policy.digest, "files": files, POLICY_ENV: os.environ.get(POLICY_ENV)},
        "decision": {
            "fingerprint": decision.fingerprint,
            "ok": decision.ok,
            "paths": {name: _path(decision.paths[name]) for name in PATHS},
            "refused": [o.to_dict() for o in decision.refused],
            "warnings": list(decision.warnings),
        },
    }


def node_payload(request: Mapping[str, Any]) -> dict[str, Any]:
    """Gather this node's facts and decide; a bad input of the node is an ``error`` answer.

    *request* holds ``model``, ``probe``, ``timeout`` (seconds each probe may take), the
    driver's explicit ``facts`` and ``env``, and ``policy``: the ``fleet --policy`` files as
    ``{"name", "text"}`` (written to a temporary folder here, loaded on top of the node's own).
    """
    import tempfile
    from pathlib import Path

    from ..facts.machine import gather
    from ..facts.providers import Context

    environ = dict(os.environ)
    base = {"host": socket.gethostname(), "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES")}
    machine = gather(
        probe=bool(request.get("probe")),
        context=Context(env=environ, timeout_s=float(request.get("timeout") or 300.0)),
    )
    try:
        with tempfile.TemporaryDirectory(prefix="kernelpolicy-fleet-") as tmp:
            sent: list[tuple[str, str]] = []  # (the copy here, the name the driver gave)
            for i, item in enumerate(request.get("policy") or ()):
                name = Path(str(item["name"])).name or "policy.yaml"
                path = Path(tmp) / str(i) / name  # one folder each: two files of one name stay two
                path.parent.mkdir()
                path.write_text(str(item["text"]), encoding="utf-8")
                sent.append((str(path), str(item["name"])))
            answer = decide(
                machine,
                model=str(request["model"]),
                environ=environ,
                facts=request.get("facts") or None,
                env=request.get("env") or None,
                sent=sent,
            )
    except KernelPolicyError as exc:
        reason = exc.one_line().removeprefix("error: ")
        return {**base, "status": "error", "kernelpolicy": __version__, "error": reason}
    return {**base, **answer, "gpu": machine.gpu.to_json() if machine.gpu else None, "gpu_reason": machine.gpu_reason}
