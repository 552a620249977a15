"""``kernelpolicy fleet``: every node's decision, before a multi-node launch.

On a Ray cluster one task per alive node gathers that node's facts and decides with its own
policy files and environment (:mod:`kernelpolicy.fleet._ray`); ``--from`` reads
``kernelpolicy facts --json`` files collected by other means and decides each here. Exit
status: 0 every node agrees, 1 they disagree, 2 bad input (no Ray, no cluster, an unreadable
file), 3 a path has no backend, 4 a live node gave no decision (its row says why), 5 a node
refused an explicit choice (``--fact deploy.moe_backend=...``, ``--env VLLM_USE_DEEP_GEMM=1``) and
decided another backend, as ``explain`` exits 5.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import UsageError
from ._common import split_assignment

if TYPE_CHECKING:
    import argparse

    from ..fleet import NodeAnswer
    from ..policy import Policy

__all__ = ["HEAD_ROW", "add_parser", "run"]

#: The node id of ``--head``'s row.
HEAD_ROW = "head-shell"


def add_parser(subparsers: Any) -> None:
    """Add the ``fleet`` subcommand to *subparsers* (from ``add_subparsers``)."""
    p = subparsers.add_parser(
        "fleet",
        help="every node's decision on a Ray cluster (or from facts files), grouped",
        description="Ask every alive node of a Ray cluster for its facts and its decision for "
        "--model (its own policy files and environment, and --policy), group the nodes by decision "
        "fingerprint within each GPU class (compute capability) and list the facts that differ. "
        "Exit 0 every class agrees within itself, 1 the nodes of a class disagree, 2 bad input, "
        "3 a path has no backend, 4 a node gave no decision, 5 a node refused an explicit choice.",
    )
    p.add_argument("--model", required=True, metavar="ID_OR_PATH", help="the model to decide for")
    p.add_argument("--address", metavar="ADDR", help="the Ray cluster (default: $RAY_ADDRESS, else `auto`)")
    p.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds to wait for every node (default 120)"
    )
    p.add_argument("--probe", action="store_true", help="also run the live probes on every node (as `facts --probe`)")
    p.add_argument("--json", action="store_true", help="print one JSON object (kernelpolicy.fleet/1)")
    p.add_argument(
        "--fact",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a fact of the deployment, on every node (repeatable)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable of the deployment, on every node (repeatable)",
    )
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="FILE",
        help="an operator policy file (repeatable): every node decides with it on top of its own policy files"
        " (sent to each node; with --from, loaded here with $KERNELPOLICY_POLICY's files)",
    )
    p.add_argument(
        "--head",
        action="store_true",
        help="also decide in this process, with this shell's environment, as `vllm serve` started "
        "from this shell would (run it where you run `vllm serve`: its answers reach every worker); "
        "the nodes are then one launch, and every node must agree whatever its GPU class",
    )
    p.add_argument(
        "--from",
        dest="files",
        nargs="+",
        metavar="FILE",
        help="decide from `kernelpolicy facts --json` files, or the `vllm collect-env` / `python3 -m sglang.check_env`"
        " reports engine issues carry, instead of asking a cluster (this machine's policy)",
    )
    p.set_defaults(run=run)


def _forwarded_env(environ: Mapping[str, str], policy: Policy) -> dict[str, str]:
    """The ``VLLM_*`` variables rules read, from this shell: vLLM copies them to every worker."""
    from ..deployment.pipeline import env_names

    return {n: environ[n] for n in env_names(policy) if n.startswith("VLLM_") and n in environ}


def _policy_texts(files: list[str]) -> list[dict[str, str]]:
    """``--policy`` files as ``{"name", "text"}``: what each node writes and loads (a node has
    no copy of a file of this machine)."""
    from ..dsl.files import SourceError, decode, read_bounded

    out = []
    for name in files:
        try:
            # named as the loader names a file given on the command line (`./a.yaml` is `a.yaml`)
            out.append({"name": str(Path(name)), "text": decode(read_bounded(Path(name), name), name)})
        except SourceError as exc:
            raise UsageError(f"--policy `{name}`: {exc.diagnostic.message}") from None
    return out


def _request(args: argparse.Namespace) -> dict[str, Any]:
    from ..dsl.loader import load_policy
    from ..facts.record import parse_fact_text
    from ._common import policy_files

    facts = {}
    for item in args.fact:
        key, value = split_assignment(item, "KEY")
        facts[key] = parse_fact_text(key, value)
    policy = load_policy(policy_files(args.policy), environ=False)  # as every command reads them
    env = {**_forwarded_env(os.environ, policy), **dict(split_assignment(e, "NAME") for e in args.env)}
    return {
        "model": args.model,
        "probe": bool(args.probe),
        "timeout": args.timeout,
        "facts": facts,
        "env": env,
        "policy": _policy_texts(list(args.policy)),
    }


def _from_files(files: list[str], request: dict[str, Any]) -> tuple[dict[str, Any], list[NodeAnswer]]:
    from ..fleet._files import answers_from_files

    return answers_from_files(files, request)


def _here(request: dict[str, Any]) -> NodeAnswer:
    """This process's row: the machine and the environment of the shell that runs ``vllm serve``."""
    import socket

    from ..fleet import answer_from_payload
    from ..fleet._shim import run_on_node

    return answer_from_payload(HEAD_ROW, socket.gethostname(), run_on_node(request))


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``kernelpolicy fleet``; returns the exit status (bad input raises :class:`UsageError`)."""
    from ..fleet import build_report, render_text

    stream = out or sys.stdout
    if not args.timeout > 0:
        raise UsageError(f"--timeout `{args.timeout:g}` must be a positive number of seconds")
    if args.files and (args.address or args.probe):
        raise UsageError("--from decides from files; --address and --probe ask a cluster: give one or the other")
    request = _request(args)
    if args.files:  # decided here: the files themselves, not copies
        cluster, rows = _from_files(list(args.files), {**request, "policy": [], "policy_paths": list(args.policy)})
    else:
        from ..fleet._ray import audit

        cluster, rows = audit(request, address=args.address, timeout=args.timeout)
    if args.head:
        rows.insert(0, _here(request))
    # --head: one launch, whose shell's settings reach every worker: every node must agree
    report = build_report(rows, {**cluster, "model": args.model}, by_class=not args.head)
    if args.json:
        stream.write(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    else:
        stream.write(render_text(report) + "\n")
    return report.exit
