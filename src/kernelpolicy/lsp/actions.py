"""What the language server offers to do with a text, without the protocol: code actions (``fmt``
the file, bound a rule whose cited fix has shipped with an ``until``, narrow a rule the proof
finds too wide) and what a decision becomes (a case file's ``explain``, an operator file's
``diff`` against the file on disk).

Like :mod:`.workspace`, every function takes an editor buffer and answers in plain data with
0-based lines and columns; :mod:`.server` turns that into LSP messages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dsl.files import Located, PinnedSource, YamlError, load_located
from ..facts.keys import GPU_SMS, QUANT_SCHEMES
from . import workspace as ws

__all__ = [
    "Edit",
    "Fix",
    "Lens",
    "bound_fixes",
    "case_explain",
    "case_lens",
    "diff_lens",
    "diff_on_disk",
    "narrowing",
]


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, column) to (end_line, end_column) with *text* (0-based)."""

    line: int
    column: int
    end_line: int
    end_column: int
    text: str


@dataclass(frozen=True)
class Fix:
    """A code action: its title, its kind (``quickfix``, ``source``) and its edits."""

    title: str
    kind: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Lens:
    """A code lens: the line it stands on, its title and the command (with its arguments) it runs."""

    line: int
    title: str
    command: str
    arguments: tuple[Any, ...]


# --- the rules of a buffer ------------------------------------------------------------------------


def _rule_entries(loc: Located) -> dict[str, tuple[int, dict[str, Any]]]:
    """rule id -> (its index under ``rules``, its entry)."""
    data = loc.data
    rules = data.get("rules") if isinstance(data, dict) else None
    if not isinstance(rules, list):
        return {}
    return {r["id"]: (i, r) for i, r in enumerate(rules) if isinstance(r, dict) and isinstance(r.get("id"), str)}


def _key_indent(lines: list[str], first: int) -> str:
    """The indentation of a rule's keys (the entry starts at 0-based line *first*: ``  - id: x``)."""
    m = re.match(r"^(\s*)-(\s+)", lines[first])
    return " " * (len(m.group(1)) + 1 + len(m.group(2))) if m else "    "


def _append_key(loc: Located, text: str, index: int, line: str) -> Edit:
    """An edit adding *line* (a ``key: value`` of the rule at *index*) after the rule's last line."""
    lines = text.splitlines()
    first = loc.where(("rules", index), key=False)[0] - 1
    last = ws._last_line(loc, ("rules", index)) - 1
    while last + 1 < len(lines) and lines[last + 1].strip() and not lines[last + 1].lstrip().startswith("-"):
        indent = len(lines[last + 1]) - len(lines[last + 1].lstrip())
        if indent <= len(lines[first]) - len(lines[first].lstrip()):
            break
        last += 1  # the rest of a multi-line value
    at = last + 1
    return Edit(at, 0, at, 0, f"{_key_indent(lines, first)}{line}\n")


def _flow(value: Any) -> str:
    """A condition value as the rule files write it in a flow mapping."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return f'"{text}"' if re.search(r"[:{}\[\],#&*!|>'\"%@`<=]", text) or not text else text


def _load(text: str, path: Path) -> Located | None:
    if not ws.is_ours(text, path):
        return None
    try:
        return load_located(text, str(path))
    except YamlError:
        return None


# --- bound a rule whose fix has shipped -------------------------------------------------------------


def _buffer_policy(text: str, path: Path, policy: Sequence[Path]) -> Any:
    """The policy with the buffer as one of its files (``None`` when it does not load)."""
    from ..dsl.loader import load_files
    from ..errors import KernelPolicyError

    base, same = ws._base_files(path, policy)
    display = same.display if same is not None else str(path)
    layer = same.layer if same is not None else "policy"
    files = [*base, PinnedSource(path, display, layer, text.encode("utf-8", "surrogateescape"))]
    try:
        return load_files(files)
    except KernelPolicyError:
        return None


def bound_fixes(text: str, path: Path, policy: Sequence[Path] = ()) -> list[Fix]:
    """For each rule of the buffer without an ``until`` whose cited fix (``fixed in FlashInfer
    0.6.16`` in its ``because`` or ``help``) has shipped in a scanned release where the rule
    still acts (``kernelpolicy knowledge stale``): an ``until`` on the fixed release."""
    from ..analysis.fixes import stale_bounds

    loc = _load(text, path)
    if loc is None:
        return []
    mine = _rule_entries(loc)
    if not mine:
        return []
    loaded = _buffer_policy(text, path, policy)
    if loaded is None:
        return []
    out: list[Fix] = []
    for stale in stale_bounds(loaded):
        entry = mine.get(stale.rule)
        if entry is None or "until" in entry[1]:
            continue
        until = f'until: {{{stale.fix.key}: ">={stale.fix.version}"}}'
        out.append(
            Fix(
                f"add `{until}` to `{stale.rule}`: its cited fix ships in {', '.join(stale.shipped_in)}",
                "quickfix",
                (_append_key(loc, text, entry[0], until),),
            )
        )
    return out


# --- narrow a rule the proof finds too wide ----------------------------------------------------------

#: The dimensions a narrower ``when`` leaves out first: what tells deployments apart the most plainly.
_NARROW_FIRST = ("quant.moe_scheme", "quant.scheme", "model.type", "gpu.sm")
#: Labels of a class that stand for no value a rule can name.
_NOT_VALUES = ("<other>", "unknown")


def _box(cell: str) -> dict[str, list[str]]:
    """The first box of a finding's cells (``sm90 x fp8_block x deploy.tp=8|4 x ...``) as
    dimension -> values; bare labels are ``gpu.sm``, ``quant.scheme`` or ``model.type``."""
    out: dict[str, list[str]] = {}
    for part in cell.split("; ", maxsplit=1)[0].split(" x "):
        dim, eq, labels = part.partition("=")
        if not eq:
            labels = dim
            first = labels.split("|")[0]
            dim = "gpu.sm" if first in GPU_SMS else "quant.scheme" if first in QUANT_SCHEMES else "model.type"
        values = [v for v in labels.split("|") if v not in _NOT_VALUES and " " not in v]
        if values:
            out[dim] = values
    return out


def narrowing(text: str, path: Path, rule: str, cell: str) -> Fix | None:  # noqa: PLR0911
    """A narrower ``when`` for *rule* of the buffer, from a proof finding about it (a path left
    without a backend, ...) in *cell*: the rule no longer acts where the finding's first group
    of cells has its quant scheme (else model type, else GPU), one its ``when`` does not test yet."""
    loc = _load(text, path)
    if loc is None:
        return None
    entry = _rule_entries(loc).get(rule)
    if entry is None:
        return None
    index, written = entry
    when = written.get("when")
    if when is not None and not isinstance(when, dict):
        return None
    tested = set(when or {})
    box = _box(cell)
    dims = [d for d in _NARROW_FIRST if d in box] + [d for d in box if d not in _NARROW_FIRST]
    dim = next((d for d in dims if d not in tested and d != "model.is_moe"), None)
    if dim is None or "not" in tested:
        return None
    values = box[dim]
    exclude = f"not: {{{dim}: {_flow(values[0] if len(values) == 1 else values)}}}"
    said = ", ".join(values)
    title = f"narrow `{rule}`: leave out `{dim}` {said} (the proof's first group of cells it is about)"
    lines = text.splitlines()
    if when is None:
        return Fix(title, "quickfix", (_append_key(loc, text, index, f"when: {{{exclude}}}"),))
    line, _col, _w = loc.where(("rules", index, "when"), key=True)
    written_line = lines[line - 1]
    flow = re.match(r"^(?P<head>\s*(?:-\s+)?when:\s*\{)(?P<body>.*)\}\s*(?:#.*)?$", written_line)
    if flow is not None:  # `when: {...}` on one line: the new test goes in before its `}`
        end = flow.end("body")
        sep = ", " if flow.group("body").strip() else ""
        return Fix(title, "quickfix", (Edit(line - 1, end, line - 1, end, f"{sep}{exclude}"),))
    child = next((n for n in range(line, len(lines)) if lines[n].strip()), None)
    if child is None:
        return None
    indent = lines[child][: len(lines[child]) - len(lines[child].lstrip())]
    return Fix(title, "quickfix", (Edit(line, 0, line, 0, f"{indent}{exclude}\n"),))


# --- what the decision becomes --------------------------------------------------------------------


def case_lens(text: str, path: Path, uri: str) -> Lens | None:
    """On a case file's ``given``: the decision the case resolves to, in a word per path; the
    command shows the whole ``explain``."""
    loc = _load(text, path)
    if loc is None or not ws._is_case(loc.data) or not isinstance(loc.data.get("given"), dict):
        return None
    line = loc.where(("given",), key=True)[0] - 1
    decision, _policy, error = _case_decision(loc, path)
    if decision is None:
        return Lens(line, f"explain: {error}", "kernelpolicy.explain", (uri,))
    said = ", ".join(f"{name} {p.backend or 'none'}" for name, p in decision.paths.items() if name != "warmup")
    return Lens(line, f"explain: {said}", "kernelpolicy.explain", (uri,))


def case_explain(text: str, path: Path) -> str:
    """The ``explain`` of the case in the buffer (its ``given``, resolved as ``kernelpolicy test``
    resolves it), or the one line that says why there is none."""
    loc = _load(text, path)
    if loc is None or not ws._is_case(loc.data):
        return "not a case file: `explain` needs a `given`"
    decision, policy, error = _case_decision(loc, path)
    if decision is None:
        return error
    from ..render.explain import render

    return render(decision, policy)


def _case_decision(loc: Located, path: Path) -> tuple[Any, Any, str]:
    """(decision, policy, "") of a case, or (None, None, why not)."""
    from ..analysis.cases import case_problem, given_facts
    from ..dsl.loader import load_policy
    from ..errors import KernelPolicyError
    from ..resolver import resolve

    data = loc.data
    if not isinstance(data, dict) or "given" not in data:
        return None, None, "not a case file"
    problem = case_problem({"expect": {}, **data})
    if problem is not None:
        return None, None, problem
    given = data["given"]
    named = given.get("policy") or ()
    files = [str((path.parent / p).resolve()) for p in ([named] if isinstance(named, str) else named)]
    try:
        policy = load_policy(files, environ=False)
        return resolve(given_facts(given, policy), policy), policy, ""
    except KernelPolicyError as exc:
        return None, None, exc.one_line()


def diff_lens(text: str, path: Path, uri: str) -> Lens | None:
    """On the first line of an operator policy file saved on disk (not a shipped table, not a
    case): the command that shows how the buffer's decisions differ from the saved file's."""
    from .._paths import shipped_rules_dir

    loc = _load(text, path)
    if loc is None or ws._is_case(loc.data) or not path.is_file():
        return None
    if ws._resolved(path).is_relative_to(ws._resolved(shipped_rules_dir())):
        return None
    return Lens(0, "diff against the file on disk", "kernelpolicy.diff", (uri,))


def diff_on_disk(text: str, path: Path, policy: Sequence[Path] = ()) -> str:
    """``kernelpolicy diff SAVED BUFFER`` of an operator file: every group of cells whose backend
    changes on some path, counted, on the shipped tables and the workspace's other policy files."""
    from ..analysis.diffing import diff
    from ..dsl.loader import load_files
    from ..errors import KernelPolicyError

    try:
        saved = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read `{path}`: {exc}"
    base, same = ws._base_files(path, policy)
    display = same.display if same is not None else str(path)
    layer = same.layer if same is not None else "policy"

    def loaded(body: str) -> Any:
        return load_files([*base, PinnedSource(path, display, layer, body.encode("utf-8", "surrogateescape"))])

    try:
        old, new = loaded(saved), loaded(text)
    except KernelPolicyError as exc:
        return f"no diff: {exc.one_line()}"
    return "\n".join(diff(old, new, listed=3).lines(3))
