"""Fleet audit: every node's kernel decision, grouped, before a multi-node launch.

Each node answers with a JSON payload (:func:`kernelpolicy.fleet._node.node_payload`: its facts,
gathered by the same providers as ``kernelpolicy facts``, and the decision its own policy files
and environment give); this module turns the answers into a report. It is pure: Ray lives in
:mod:`kernelpolicy.fleet._ray` only, and the answers may come from files instead
(``kernelpolicy fleet --from``).

Nodes are grouped by decision fingerprint (the facts, the policy digest and every path's
outcome, as in the plugin's rank agreement), and the facts that differ between the groups are
listed in the rank-agreement report's words.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..facts.keys import DECIDED_PATHS
from ..facts.keys import PATHS as ALL_PATHS

__all__ = [
    "EXIT_AGREE",
    "EXIT_DISAGREE",
    "EXIT_INCOMPLETE",
    "EXIT_NO_BACKEND",
    "EXIT_REFUSED",
    "PATHS",
    "SCHEMA",
    "FleetReport",
    "Group",
    "NodeAnswer",
    "answer_from_payload",
    "build_report",
    "exit_status",
    "group_nodes",
    "path_summary",
    "render_text",
    "short_ids",
]

SCHEMA: Final = "kernelpolicy.fleet/1"
PATHS: Final = ALL_PATHS
EXIT_AGREE: Final = 0
EXIT_DISAGREE: Final = 1
EXIT_NO_BACKEND: Final = 3
EXIT_INCOMPLETE: Final = 4  #: a node that should have answered did not
#: A node refused an explicit choice (``--fact deploy.moe_backend=...``, ``--env
#: VLLM_USE_DEEP_GEMM=1``) and decided another backend, as ``explain`` exits 5.
EXIT_REFUSED: Final = 5


@dataclass(frozen=True)
class NodeAnswer:
    """One node's row: who it is, and what it answered (or why it did not).

    ``status`` is ``ok`` (it decided), ``dead`` (the cluster listed it dead before the audit;
    it does not change the exit status), or why a live node gave no decision: ``missing``
    (kernelpolicy not importable there), ``error`` (its own bad input, e.g. a policy file),
    ``failed`` (the task failed: the node died, the task could not be placed) or ``timeout``.
    """

    node_id: str
    address: str | None
    status: str
    reason: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    head: bool = False  #: the cluster's head node (where ``vllm serve`` runs)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def facts(self) -> Mapping[str, Any]:
        facts = self.payload.get("facts")
        return facts if isinstance(facts, Mapping) else {}

    @property
    def decision(self) -> Mapping[str, Any]:
        decision = self.payload.get("decision")
        return decision if isinstance(decision, Mapping) else {}

    @property
    def refused(self) -> tuple[str, ...]:
        """The explicit choices this node's decision refused, in ``explain``'s words
        (```--moe-backend deep_gemm` (moe: rule)``); empty for a node that answered none."""
        refused = self.decision.get("refused")
        if not isinstance(refused, list):
            return ()
        out = []
        for o in refused:
            if isinstance(o, Mapping):
                rules = o.get("rules")
                why = ", ".join(str(r) for r in rules) if isinstance(rules, list) and rules else "?"
                out.append(f"`{o.get('source')}` ({o.get('path')}: {why})")
        return tuple(out)

    @property
    def fingerprint(self) -> str | None:
        fp = self.decision.get("fingerprint")
        return fp if isinstance(fp, str) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.node_id,
            "address": self.address,
            "status": self.status,
            "reason": self.reason,
            "head": self.head,
            **{k: v for k, v in self.payload.items() if k != "status"},
        }


def answer_from_payload(node_id: str, address: str | None, payload: object) -> NodeAnswer:
    """A node's row from what its task returned (any kernelpolicy version: checked, not trusted)."""
    if not isinstance(payload, Mapping):
        return NodeAnswer(node_id, address, "error", f"unreadable answer ({type(payload).__name__})")
    status = payload.get("status")
    if status == "ok":
        decision = payload.get("decision")
        if not (
            isinstance(decision, Mapping)
            and isinstance(decision.get("fingerprint"), str)
            and isinstance(payload.get("facts"), Mapping)
        ):
            return NodeAnswer(node_id, address, "error", "unreadable answer (no decision or facts)", payload)
        return NodeAnswer(node_id, address, "ok", None, payload)
    reason = payload.get("error")
    kind = status if status in ("missing", "error") else "error"
    return NodeAnswer(node_id, address, kind, str(reason) if reason else f"status `{status}`", payload)


@dataclass(frozen=True)
class Group:
    """Nodes that reached the same decision fingerprint."""

    label: str
    fingerprint: str
    nodes: tuple[NodeAnswer, ...]

    @property
    def decision(self) -> Mapping[str, Any]:
        return self.nodes[0].decision

    @property
    def facts(self) -> Mapping[str, Any]:
        return self.nodes[0].facts

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "fingerprint": self.fingerprint,
            "nodes": [n.node_id for n in self.nodes],
            "paths": dict(self.decision.get("paths") or {}),
        }


@dataclass(frozen=True)
class FleetReport:
    """Rows, groups, the facts that differ between groups, and the exit status."""

    cluster: Mapping[str, Any]
    nodes: tuple[NodeAnswer, ...]
    groups: tuple[Group, ...]
    differing: tuple[str, ...]
    exit: int

    @property
    def decisions_differ(self) -> bool:
        """More than one group, and not only in facts: the paths' backends differ."""
        return len({_paths_key(g.decision) for g in self.groups}) > 1

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "cluster": dict(self.cluster),
            "nodes": [n.to_json() for n in self.nodes],
            "groups": [g.to_json() for g in self.groups],
            "differing_facts": list(self.differing),
            "exit": self.exit,
        }


def _paths_key(decision: Mapping[str, Any]) -> str:
    paths = decision.get("paths") or {}
    return repr(sorted((k, _backend(paths.get(k))) for k in PATHS))


def _labels() -> list[str]:
    letters = string.ascii_uppercase
    return list(letters) + [a + b for a in letters for b in letters]


def group_nodes(nodes: Sequence[NodeAnswer]) -> tuple[Group, ...]:
    """Nodes that decided, grouped by fingerprint: the largest group first (``A``), ties by first node id."""
    by_fp: dict[str, list[NodeAnswer]] = {}
    for node in nodes:
        if node.ok and node.fingerprint is not None:
            by_fp.setdefault(node.fingerprint, []).append(node)
    ordered = sorted(by_fp.items(), key=lambda kv: (-len(kv[1]), min(n.node_id for n in kv[1])))
    return tuple(
        Group(label, fp, tuple(sorted(members, key=lambda n: n.node_id)))
        for label, (fp, members) in zip(_labels(), ordered, strict=False)
    )


def _no_backend(node: NodeAnswer) -> bool:
    return node.decision.get("ok") is False


def exit_status(nodes: Sequence[NodeAnswer], groups: Sequence[Group]) -> int:
    """1 the groups differ; else 4 a live node gave no decision; else 3 a path has no backend;
    else 5 a node refused an explicit choice; else 0."""
    if len(groups) > 1:
        return EXIT_DISAGREE
    if any(n.status not in ("ok", "dead") for n in nodes):
        return EXIT_INCOMPLETE
    if any(_no_backend(n) for n in nodes if n.ok):
        return EXIT_NO_BACKEND
    if any(n.refused for n in nodes if n.ok):
        return EXIT_REFUSED
    return EXIT_AGREE


def build_report(nodes: Sequence[NodeAnswer], cluster: Mapping[str, Any]) -> FleetReport:
    """The report for *nodes* (in the order given) and a description of the *cluster*."""
    from ..engines.agreement import fact_differences

    groups = group_nodes(nodes)
    differing: tuple[str, ...] = ()
    if len(groups) > 1:
        by_label = {f"group {g.label}": g.facts for g in groups}
        differing = tuple(fact_differences(by_label, between="groups"))
    return FleetReport(dict(cluster), tuple(nodes), groups, differing, exit_status(nodes, groups))


# -- text rendering --------------------------------------------------------------------------

_NONE: Final = "-"


def _backend(path: object) -> str:
    if not isinstance(path, Mapping):
        return _NONE
    if "kernels" in path:
        kernels = path.get("kernels") or []
        return ",".join(str(k) for k in kernels) or "none"
    if path.get("present") is False:
        return "n/a"
    backend = path.get("backend")
    return str(backend) if backend else "NONE"


def path_summary(decision: Mapping[str, Any]) -> str:
    """``dense=cutlass [rule] moe=triton router=cublas warmup=none``, as the plugin logs it."""
    paths = decision.get("paths") or {}
    parts = []
    for name in DECIDED_PATHS:
        p = paths.get(name)
        if not isinstance(p, Mapping) or p.get("present") is False:
            continue
        rule = p.get("rule")
        parts.append(f"{name}={_backend(p)}" + (f" [{rule}]" if rule else ""))
    parts.append("warmup=" + _backend(paths.get("warmup")))
    return " ".join(parts)


def _gpu(node: NodeAnswer) -> str:
    f = node.facts
    if not node.ok:
        return _NONE
    sm = f.get("gpu.sm")
    if sm is None:
        return "none"
    name = f.get("gpu.name")
    count = f.get("gpu.count")
    return " ".join(str(p) for p in (name, f"x{count}" if count else None, sm) if p)


def _fact(node: NodeAnswer, key: str) -> str:
    value = node.facts.get(key)
    return _NONE if value is None else str(value)


def _status(node: NodeAnswer) -> str:
    if node.ok:
        return "refused: " + ", ".join(node.refused) if node.refused else "ok"
    return f"{node.status}: {node.reason}" if node.reason else node.status


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


_COLUMNS: Final = (
    "NODE", "ADDRESS", "GPU", "DRIVER", "VLLM", "TORCH", "DEEPGEMM", "KP",
    "FINGERPRINT", "DENSE", "MOE", "ROUTER", "WARMUP", "GROUP", "STATUS",
)  # fmt: skip


_CONTROL: Final = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def _clean(text: str) -> str:
    """*text* with control characters escaped (``\\x1b``): a facts file's GPU name or a node's
    reason must not move the terminal's cursor or clear it."""
    return text.translate(_CONTROL)


def short_ids(ids: Sequence[str], least: int = 12) -> dict[str, str]:
    """Each id cut to the shortest length (at least *least*) at which no two different ids look
    the same: Ray's 56-digit node ids fit a table, two facts files never share a row name."""
    unique = list(dict.fromkeys(ids))
    width = least
    while width < max((len(i) for i in unique), default=0) and len({i[:width] for i in unique}) < len(unique):
        width += 1
    return {i: i if len(i) <= width else i[:width] for i in unique}


def render_text(report: FleetReport) -> str:
    """The report as text: a header, one row per node, the groups, the differing facts, the result."""
    c = report.cluster
    alive = sum(1 for n in report.nodes if n.status != "dead")
    dead = len(report.nodes) - alive
    answered = sum(1 for n in report.nodes if n.ok)
    where = c.get("source") or "?"
    head = f"{where}  model {c.get('model')}  {alive} node(s)" + (f", {dead} dead" if dead else "")
    head += f"; {answered} decided"
    if isinstance(c.get("seconds"), (int, float)):
        head += f" in {c['seconds']:.1f}s"
    group_of = {n.node_id: g.label for g in report.groups for n in g.nodes}
    short = short_ids([n.node_id for n in report.nodes])
    rows: list[list[str]] = [list(_COLUMNS)]
    for n in report.nodes:
        paths = n.decision.get("paths") or {}
        rows.append(
            [
                short[n.node_id] + ("*" if n.head else ""),
                n.address or _NONE,
                _gpu(n),
                _fact(n, "driver.version"),
                _fact(n, "vllm.version"),
                _fact(n, "torch.version"),
                _fact(n, "deep_gemm.version") if n.facts.get("deep_gemm.source") != "none" else "none",
                str(n.payload.get("kernelpolicy") or _NONE),
                (n.fingerprint or _NONE)[7:19] or _NONE,
                *(_backend(paths.get(p)) if n.ok else _NONE for p in PATHS),
                group_of.get(n.node_id, _NONE),
                _status(n),
            ]
        )
    lines = [head, "", *_table(rows)]
    if any(n.head for n in report.nodes):
        lines.append("(* the head node, where `vllm serve` runs)")
    lines.append("")
    if report.groups:
        lines.append("groups (by decision fingerprint):")
        for g in report.groups:
            count = f"{len(g.nodes)} node" + ("s" if len(g.nodes) != 1 else "")
            ids = ", ".join(short[n.node_id] for n in g.nodes)
            lines.append(f"  {g.label}  {count} [{ids}]: {path_summary(g.decision)} [{g.fingerprint[:19]}]")
    if report.differing:
        lines.append("facts that differ between the groups:")
        lines += [f"  {d}" for d in report.differing]
    lines.append("result  " + _result(report))
    return "\n".join(_clean(line) for line in lines)  # each is one line: a newline in a value is escaped


def _result(report: FleetReport) -> str:
    missing = [n for n in report.nodes if n.status not in ("ok", "dead")]
    parts = []
    if len(report.groups) > 1:
        what = "the decisions differ" if report.decisions_differ else "same backends, the facts or policy files differ"
        parts.append(f"{len(report.groups)} groups, {what}")
    elif report.groups:
        parts.append("every node that answered agrees")
    else:
        parts.append("no node decided")
    if missing:
        parts.append(f"{len(missing)} node(s) did not answer")
    if any(_no_backend(n) for n in report.nodes if n.ok):
        parts.append("a path has no backend")
    refusing = sum(1 for n in report.nodes if n.ok and n.refused)
    if refusing:
        parts.append(f"an explicit choice was refused on {refusing} node(s), another backend decided")
    return "; ".join(parts) + f" (exit {report.exit})"
