"""Fleet audit: every node's kernel decision, grouped, before a multi-node launch.

Each node answers with a JSON payload (:func:`kernelpolicy.fleet._node.node_payload`: its facts,
gathered by the same providers as ``kernelpolicy facts``, and the decision its own policy files
and environment give); this module turns the answers into a report. It is pure: Ray lives in
:mod:`kernelpolicy.fleet._ray` only, and the answers may come from files instead
(``kernelpolicy fleet --from``).

Nodes are grouped by decision fingerprint (the facts, the policy digest and every path's
outcome, as in the plugin's rank agreement), and the facts that differ between the groups are
listed in the rank-agreement report's words. Groups are compared within a GPU class (the
compute capability, ``gpu.sm``): GPUs of different classes decide differently by design, and one
launch runs on one class, so a mixed fleet whose every class agrees within itself agrees.
"""

from __future__ import annotations

import string
from collections import Counter
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
    "ONE_LAUNCH",
    "PATHS",
    "SCHEMA",
    "FleetReport",
    "GpuClass",
    "Group",
    "NodeAnswer",
    "answer_from_payload",
    "build_report",
    "exit_status",
    "gpu_class",
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


def gpu_class(node: NodeAnswer) -> str:
    """The GPU class a node's decision is compared within: its compute capability (``sm90``), or
    ``none``."""
    sm = node.facts.get("gpu.sm")
    return str(sm) if sm else "none"


@dataclass(frozen=True)
class Group:
    """Nodes that reached the same decision fingerprint."""

    label: str
    fingerprint: str
    nodes: tuple[NodeAnswer, ...]

    @property
    def gpu_class(self) -> str:
        return gpu_class(self.nodes[0])

    @property
    def decision(self) -> Mapping[str, Any]:
        return self.nodes[0].decision

    @property
    def facts(self) -> Mapping[str, Any]:
        return self.nodes[0].facts

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "gpu_class": self.gpu_class,
            "fingerprint": self.fingerprint,
            "nodes": [n.node_id for n in self.nodes],
            "paths": dict(self.decision.get("paths") or {}),
        }


@dataclass(frozen=True)
class GpuClass:
    """The groups of one GPU class: they must agree (one launch runs on one class)."""

    name: str  #: ``sm90``
    groups: tuple[Group, ...]
    differing: tuple[str, ...]  #: the facts that differ between its groups (none: it agrees)

    @property
    def agrees(self) -> bool:
        return len(self.groups) <= 1

    @property
    def decisions_differ(self) -> bool:
        """More than one group, and not only in facts: the paths' backends differ."""
        return len({_paths_key(g.decision) for g in self.groups}) > 1

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_class": self.name,
            "groups": [g.label for g in self.groups],
            "agrees": self.agrees,
            "differing_facts": list(self.differing),
        }


@dataclass(frozen=True)
class FleetReport:
    """Rows, groups, the GPU classes, the facts that differ between groups of a class, and the
    exit status."""

    cluster: Mapping[str, Any]
    nodes: tuple[NodeAnswer, ...]
    groups: tuple[Group, ...]
    differing: tuple[str, ...]
    exit: int
    classes: tuple[GpuClass, ...] = ()

    @property
    def decisions_differ(self) -> bool:
        """Within some GPU class, more than one group and not only in facts: the backends differ."""
        return any(c.decisions_differ for c in self.classes)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "cluster": dict(self.cluster),
            "nodes": [n.to_json() for n in self.nodes],
            "groups": [g.to_json() for g in self.groups],
            "gpu_classes": [c.to_json() for c in self.classes],
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


#: The class name when every node must agree, whatever its GPU (``fleet --head``: one launch).
ONE_LAUNCH: Final = "one launch"


def _classes(groups: Sequence[Group], *, by_class: bool = True) -> tuple[GpuClass, ...]:
    from ..engines.agreement import fact_differences

    by: dict[str, list[Group]] = {}
    for g in groups:
        by.setdefault(g.gpu_class if by_class else ONE_LAUNCH, []).append(g)
    out = []
    for name, members in by.items():
        differing: tuple[str, ...] = ()
        if len(members) > 1:
            differing = tuple(fact_differences({f"group {g.label}": g.facts for g in members}, between="groups"))
        out.append(GpuClass(name, tuple(members), differing))
    return tuple(out)


def exit_status(nodes: Sequence[NodeAnswer], groups: Sequence[Group], *, by_class: bool = True) -> int:
    """1 the groups of one GPU class differ (*by_class* false: any groups differ); else 4 a live
    node gave no decision; else 3 a path has no backend; else 5 a node refused an explicit
    choice; else 0 (GPU classes that each agree within themselves agree)."""
    if any(not c.agrees for c in _classes(groups, by_class=by_class)):
        return EXIT_DISAGREE
    if any(n.status not in ("ok", "dead") for n in nodes):
        return EXIT_INCOMPLETE
    if any(_no_backend(n) for n in nodes if n.ok):
        return EXIT_NO_BACKEND
    if any(n.refused for n in nodes if n.ok):
        return EXIT_REFUSED
    return EXIT_AGREE


def build_report(nodes: Sequence[NodeAnswer], cluster: Mapping[str, Any], *, by_class: bool = True) -> FleetReport:
    """The report for *nodes* (in the order given) and a description of the *cluster*.

    *by_class*: groups are compared within each GPU class (a fleet of several); false, every
    node must agree (one launch: ``fleet --head``, whose shell's settings reach every worker)."""
    groups = group_nodes(nodes)
    classes = _classes(groups, by_class=by_class)
    differing = tuple(d for c in classes for d in c.differing)
    status = exit_status(nodes, groups, by_class=by_class)
    return FleetReport(dict(cluster), tuple(nodes), groups, differing, status, classes)


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


def _driver(node: NodeAnswer) -> str:
    """``driver.version`` as NVIDIA writes it: the fact is a normalised version (``580.159.4``),
    the driver's patch level has two digits (``580.159.04``)."""
    text = _fact(node, "driver.version")
    parts = text.split(".")
    if len(parts) == 3 and parts[2].isdigit() and len(parts[2]) < 2:
        parts[2] = parts[2].zfill(2)
    return ".".join(parts)


def _status(node: NodeAnswer) -> str:
    if node.ok:
        return "refused: " + ", ".join(node.refused) if node.refused else "ok"
    return f"{node.status}: {node.reason}" if node.reason else node.status


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


_COLUMNS: Final = (
    "NODE", "ADDRESS", "GPU", "DRIVER", "VLLM", "TORCH", "DEEPGEMM", "KP",
    "FINGERPRINT", "DENSE", "MOE", "ROUTER", "ATTENTION", "WARMUP", "GROUP", "STATUS",
)  # fmt: skip


_CONTROL: Final = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def _clean(text: str) -> str:
    """*text* with control characters escaped (``\\x1b``): a facts file's GPU name or a node's
    reason must not move the terminal's cursor or clear it."""
    return text.translate(_CONTROL)


def _short_paths(paths: Sequence[str]) -> dict[str, str]:
    """Each path as its shortest tail of whole components that no other path ends with
    (``h200.json``, ``rack2/h200.json``): the part that tells facts files apart."""
    parts = {p: tuple(c for c in p.replace("\\", "/").split("/") if c) or (p,) for p in paths}
    ends: Counter[tuple[str, ...]] = Counter()  # how many paths end with each tail (5,000 node files: linear)
    for mine in parts.values():
        ends.update(mine[-n:] for n in range(1, len(mine) + 1))
    out = {}
    for p, mine in parts.items():
        n = next((n for n in range(1, len(mine) + 1) if ends[mine[-n:]] == 1), len(mine))
        out[p] = "/".join(mine[-n:]) if n < len(mine) else p
    return out


def short_ids(ids: Sequence[str], least: int = 12) -> dict[str, str]:
    """Each id cut to the shortest length (at least *least*) at which no two different ids look
    the same: Ray's 56-digit node ids fit a table; a facts file (a path) is named by the tail of
    its path that tells it from the others (its file name, mostly), never a cut-off folder."""
    unique = list(dict.fromkeys(ids))
    paths = [i for i in unique if "/" in i or "\\" in i or i.endswith(".json")]
    if paths:
        named = _short_paths(paths)
        rest = short_ids([i for i in unique if i not in named], least) if len(paths) < len(unique) else {}
        return {**named, **rest}
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
                _driver(n),
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
    several = len(report.classes) > 1
    if report.groups:
        lines.append("groups (by decision fingerprint" + (", within each GPU class):" if several else "):"))
        for g in report.groups:
            count = f"{len(g.nodes)} node" + ("s" if len(g.nodes) != 1 else "")
            ids = ", ".join(short[n.node_id] for n in g.nodes[:_GROUP_NAMES])
            if len(g.nodes) > _GROUP_NAMES:  # the table above names every node
                ids += f", and {len(g.nodes) - _GROUP_NAMES:,} more"
            klass = f"{g.gpu_class}  " if several else ""
            lines.append(f"  {g.label}  {klass}{count} [{ids}]: {path_summary(g.decision)} [{g.fingerprint[:19]}]")
    for gc in report.classes:
        if gc.differing:
            lines.append("facts that differ between the groups" + (f" of {gc.name}:" if several else ":"))
            lines += [f"  {d}" for d in gc.differing]
    lines.append("result  " + _result(report))
    return "\n".join(_clean(line) for line in lines)  # each is one line: a newline in a value is escaped


#: The nodes a group's line names (the table names every node: 5,000 nodes made one line of 60 kB).
_GROUP_NAMES: Final = 8


def _result(report: FleetReport) -> str:
    missing = [n for n in report.nodes if n.status not in ("ok", "dead")]
    parts = []
    several = len(report.classes) > 1
    for c in report.classes:
        if c.agrees:
            continue
        what = "the decisions differ" if c.decisions_differ else "same backends, the facts or policy files differ"
        parts.append(f"{len(c.groups)} groups" + (f" of {c.name}" if several else "") + f", {what}")
    if not parts and several:
        names = ", ".join(c.name for c in report.classes)
        parts.append(
            f"{len(report.classes)} GPU classes ({names}), each agrees within itself"
            " (they decide differently by design: one launch runs on one class)"
        )
    elif not parts:
        parts.append("every node that answered agrees" if report.groups else "no node decided")
    if missing:
        parts.append(f"{len(missing)} node(s) did not answer")
    if any(_no_backend(n) for n in report.nodes if n.ok):
        parts.append("a path has no backend")
    refusing = sum(1 for n in report.nodes if n.ok and n.refused)
    if refusing:
        parts.append(f"an explicit choice was refused on {refusing} node(s), another backend decided")
    return "; ".join(parts) + f" (exit {report.exit})"
