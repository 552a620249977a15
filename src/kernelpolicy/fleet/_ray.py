"""The only module that imports Ray: one task pinned to each alive node, answers collected
against one deadline.

Each task has hard node affinity, no retries and reserves no CPU or GPU; the node's own
``CUDA_VISIBLE_DEVICES`` is kept (Ray before 2.56 sets it to ``""`` for a task without GPUs). Its body
is :func:`kernelpolicy.fleet._shim.run_on_node`, shipped by value, so a node without
kernelpolicy answers ``missing`` rather than failing to load the task. A node that dies, cannot
take the task, or does not answer before the deadline is a row with its reason, never a hang.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import time
from collections.abc import Mapping
from typing import Any, Final

from ..errors import UsageError
from . import NodeAnswer, answer_from_payload

__all__ = ["audit", "install_hint"]


def install_hint() -> str:
    """The line that installs Ray for this kernelpolicy (its ``ray`` extra, from where it was installed)."""
    from .._install import install_command

    return install_command("ray")


#: Keep the node's own GPU visibility in a task that reserves no GPU: Ray before 2.56 sets
#: ``CUDA_VISIBLE_DEVICES=""`` there (ray#62492 changed the default). A task with its own
#: environment needs a fresh worker on every node, so newer Ray gets none.
_TASK_ENV: Final = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
_KEEPS_VISIBILITY: Final = "2.56"


def _task_env(version: str) -> dict[str, Any]:
    """The ``runtime_env`` of the fleet task under Ray *version* (empty where none is needed)."""
    from packaging.version import Version

    try:
        keeps = Version(version) >= Version(_KEEPS_VISIBILITY)
    except ValueError:  # InvalidVersion, or more digits than int() converts
        keeps = False
    return {} if keeps else {"env_vars": dict(_TASK_ENV)}


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("ray is not installed", help=install_hint()) from None
    return ray


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _failure(ray: Any, exc: BaseException) -> str:
    """Why a node's task gave no answer, in a few words."""
    errors = ray.exceptions
    if isinstance(exc, errors.TaskUnschedulableError):
        return "its task could not be placed (the node left the cluster)"
    if isinstance(exc, errors.NodeDiedError):
        return "the node died during the audit"
    if isinstance(exc, errors.WorkerCrashedError):
        return "the worker process crashed"
    if isinstance(exc, errors.RuntimeEnvSetupError):
        return "its runtime environment could not be set up"
    if isinstance(exc, errors.RayTaskError):
        return f"the task failed: {_first_line(exc.cause) if exc.cause is not None else _first_line(exc)}"
    return f"{type(exc).__name__}: {_first_line(exc)}"


def _reachable(target: str, timeout: float) -> None:
    """Fail fast when *target* is ``HOST:PORT`` and nothing listens there (Ray itself retries for minutes)."""
    host, sep, port = target.rpartition(":")
    if not sep or "://" in target or not port.isdigit():
        return  # `auto`, `ray://...`: Ray finds or refuses them quickly
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror.lower() if exc.strerror else f"no answer within {timeout:g}s"
        raise UsageError(
            f"cannot connect to a Ray cluster at `{target}`: {why}",
            help="is the head node up? `ray status` on it prints its address",
        ) from None


def _connect(ray: Any, address: str | None, timeout: float) -> bool:
    """Connect to the cluster at *address* (never start one); True when this call connected."""
    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    _reachable(target, min(timeout, 10.0))
    try:
        ray.init(address=target, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:
        raise UsageError(
            f"cannot connect to a Ray cluster at `{target}`: {_first_line(exc)}",
            help="start one with `ray start --head`, or name it with --address HOST:PORT",
        ) from None
    return True


def _is_head(node: Mapping[str, Any]) -> bool:
    return "node:__internal_head__" in (node.get("Resources") or {})


def _dead_reason(node: Mapping[str, Any]) -> str:
    reason = node.get("DeathReasonMessage") or node.get("DeathReason")
    return f"listed dead by the cluster: {reason}" if reason else "listed dead by the cluster"


def _row(ray: Any, node: Mapping[str, Any], ref: Any, done: bool, timeout: float) -> NodeAnswer:
    """The row of an alive *node* whose task is *ref* (*done*: it finished before the deadline)."""
    node_id, ip, head = str(node["NodeID"]), node.get("NodeManagerAddress"), _is_head(node)
    if not done:
        with contextlib.suppress(Exception):  # the node may be gone already; the row says it
            ray.cancel(ref, force=True)
        return NodeAnswer(node_id, ip, "timeout", f"no answer within {timeout:g}s", head=head)
    try:
        payload = ray.get(ref, timeout=max(1.0, timeout))
    except Exception as exc:
        return NodeAnswer(node_id, ip, "failed", _failure(ray, exc), head=head)
    return dataclasses.replace(answer_from_payload(node_id, ip, payload), head=head)


def audit(
    request: Mapping[str, Any], *, address: str | None, timeout: float
) -> tuple[dict[str, Any], list[NodeAnswer]]:
    """Ask every alive node of the cluster at *address* for its answer to *request*.

    Connects (and disconnects after) unless this process is connected already; then it uses
    that connection and *address* is not read.

    :returns: a description of the cluster and one :class:`NodeAnswer` per node the cluster
        lists (alive ones first, each group by id), in the order of the table.
    :raises UsageError: Ray is not installed, or there is no cluster at *address*.
    """
    ray = _import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from . import _shim

    owned = _connect(ray, address, timeout)
    started = time.monotonic()
    try:
        nodes = sorted(ray.nodes(), key=lambda n: (not n.get("Alive"), str(n.get("NodeID"))))
        ray.cloudpickle.register_pickle_by_value(_shim)
        task = ray.remote(_shim.run_on_node)
        runtime_env = _task_env(ray.__version__)
        refs = {}
        for node in (n for n in nodes if n.get("Alive")):
            options = task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                num_cpus=0,
                num_gpus=0,
                max_retries=0,
                runtime_env=runtime_env or None,
            )
            refs[str(node["NodeID"])] = options.remote(dict(request))
        pending = list(refs.values())
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=timeout) if pending else ([], [])
        done = set(ready)
        rows = [
            _row(ray, n, refs[str(n["NodeID"])], refs[str(n["NodeID"])] in done, timeout)
            if str(n["NodeID"]) in refs
            else NodeAnswer(str(n["NodeID"]), n.get("NodeManagerAddress"), "dead", _dead_reason(n), head=_is_head(n))
            for n in nodes
        ]
        address_now = ray.get_runtime_context().gcs_address
        cluster = {
            "source": f"ray {ray.__version__} @ {address_now}",
            "ray": ray.__version__,
            "address": address_now,
            "seconds": round(time.monotonic() - started, 3),
        }
        return cluster, rows
    finally:
        if owned:
            ray.shutdown()
