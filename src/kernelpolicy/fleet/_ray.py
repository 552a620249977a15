"""The only module that imports Ray: one task pinned to each alive node, answers collected
against one deadline.

Each task has hard node affinity, no retries and reserves no CPU or GPU; the node's own
``CUDA_VISIBLE_DEVICES`` is kept (Ray would set it to ``""`` for a task without GPUs). Its body
is :func:`kernelpolicy.fleet._shim.run_on_node`, shipped by value, so a node without
kernelpolicy answers ``missing`` rather than failing to load the task. A node that dies, cannot
take the task, or does not answer before the deadline is a row with its reason, never a hang.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping
from typing import Any, Final

from ..errors import UsageError
from . import NodeAnswer, answer_from_payload

__all__ = ["INSTALL_HINT", "audit"]

INSTALL_HINT: Final = "pip install 'kernelpolicy[ray]'"
#: Keep the node's own GPU visibility in a task that reserves no GPU.
_TASK_ENV: Final = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("ray is not installed", help=INSTALL_HINT) from None
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


def _connect(ray: Any, address: str | None) -> bool:
    """Connect to the cluster at *address* (never start one); True when this call connected."""
    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    try:
        ray.init(address=target, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:
        raise UsageError(
            f"cannot connect to a Ray cluster at `{target}`: {_first_line(exc)}",
            help="start one with `ray start --head`, or name it with --address HOST:PORT",
        ) from None
    return True


def _dead_reason(node: Mapping[str, Any]) -> str:
    reason = node.get("DeathReasonMessage") or node.get("DeathReason")
    return f"listed dead by the cluster: {reason}" if reason else "listed dead by the cluster"


def audit(
    request: Mapping[str, Any], *, address: str | None, timeout: float
) -> tuple[dict[str, Any], list[NodeAnswer]]:
    """Ask every alive node of the cluster at *address* for its answer to *request*.

    :returns: a description of the cluster and one :class:`NodeAnswer` per node the cluster
        lists (alive ones first, by id), in the order of the table.
    :raises UsageError: Ray is not installed, or there is no cluster at *address*.
    """
    ray = _import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from . import _shim

    owned = _connect(ray, address)
    started = time.monotonic()
    try:
        nodes = sorted(ray.nodes(), key=lambda n: (not n.get("Alive"), str(n.get("NodeID"))))
        ray.cloudpickle.register_pickle_by_value(_shim)
        task = ray.remote(_shim.run_on_node)
        refs: dict[Any, Mapping[str, Any]] = {}
        for node in nodes:
            if node.get("Alive"):
                options = task.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                    num_cpus=0,
                    num_gpus=0,
                    max_retries=0,
                    runtime_env={"env_vars": dict(_TASK_ENV)},
                )
                refs[options.remote(dict(request))] = node
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout) if refs else ([], [])
        answers: dict[str, NodeAnswer] = {}
        for ref in ready:
            node = refs[ref]
            node_id, ip = str(node["NodeID"]), node.get("NodeManagerAddress")
            try:
                payload = ray.get(ref, timeout=max(1.0, timeout))
            except Exception as exc:
                answers[node_id] = NodeAnswer(node_id, ip, "failed", _failure(ray, exc))
                continue
            answers[node_id] = answer_from_payload(node_id, ip, payload)
        for ref in pending:
            node = refs[ref]
            node_id = str(node["NodeID"])
            reason = f"no answer within {timeout:g}s"
            answers[node_id] = NodeAnswer(node_id, node.get("NodeManagerAddress"), "timeout", reason)
            with contextlib.suppress(Exception):  # the node may be gone already; the row says it
                ray.cancel(ref, force=True)
        rows = [
            answers.get(str(n["NodeID"]))
            or NodeAnswer(str(n["NodeID"]), n.get("NodeManagerAddress"), "dead", _dead_reason(n))
            for n in nodes
        ]
        cluster = {
            "source": f"ray {ray.__version__} @ {ray.get_runtime_context().gcs_address}",
            "ray": ray.__version__,
            "address": ray.get_runtime_context().gcs_address,
            "seconds": round(time.monotonic() - started, 3),
        }
        return cluster, rows
    finally:
        if owned:
            ray.shutdown()
