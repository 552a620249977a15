"""The fleet task's body, stdlib only: it is shipped to each node by value (not by import).

So a node where kernelpolicy is not importable still runs it, and answers ``missing`` with the
Python that ran it, instead of failing to unpickle the task. Nothing here may import
kernelpolicy (or anything outside the standard library) at module level.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_on_node"]


def run_on_node(request: dict[str, Any]) -> dict[str, Any]:
    """Import kernelpolicy on this node and answer *request*; never raises."""
    import os
    import socket
    import sys

    base = {"host": socket.gethostname(), "python": sys.executable, "pid": os.getpid()}
    try:
        from kernelpolicy.fleet._node import node_payload
    except ImportError as exc:
        return {**base, "status": "missing", "error": f"kernelpolicy is not importable by `{sys.executable}` ({exc})"}
    try:
        return {**base, **node_payload(request)}
    except Exception as exc:  # a bug on the node: its row says so, the audit goes on
        return {**base, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
