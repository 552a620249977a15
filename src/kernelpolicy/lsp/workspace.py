"""What the language server says about a text, without the protocol: diagnostics, hover,
completion, definition and the document's symbols.

Every function here takes the text of an editor buffer (which may be half typed) and answers in
plain data (0-based lines and columns, as the protocol counts them); :mod:`.server` only turns
that into LSP messages. Diagnostics come from the same code as ``kernelpolicy check``: the buffer
is loaded, from memory, as an operator file on top of the shipped tables, the default policy and
the files ``$KERNELPOLICY_POLICY`` names (a buffer of one of those files takes its place), and the
proof's findings about it are placed at the rule they are about. A case file (``given`` and
``expect``) is checked for its shape, and, as saved, run as ``kernelpolicy test`` runs it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._paths import default_policy_dir, shipped_rules_dir
from ..dsl.files import Located, PinnedSource, SourceError, SourceFile, YamlError, load_located

__all__ = [
    "Completion",
    "Diag",
    "Index",
    "Location",
    "Symbol",
    "completions",
    "definition",
    "diagnose",
    "formatted",
    "hover",
    "is_ours",
    "references",
    "release_versions",
    "symbols",
    "word_at",
]

Severity = Literal["error", "warning"]
#: The top-level lists whose entries carry an ``id``, and the kind of entry each holds.
_SECTIONS: Mapping[str, str] = {
    "rules": "rule",
    "implies": "implication",
    "unsupported": "unsupported",
    "order": "order",
}
#: The keys whose value is a condition: a mapping of fact keys.
_CONDITIONS = ("when", "unless", "require", "until")
#: The keys whose value is one backend id or a list of them.
_BACKEND_KEYS = ("deny", "prefer", "use", "backend", "backends")
#: The characters of a fact key, rule id or backend id.
_WORD = re.compile(r"[A-Za-z0-9_.#:\-]+")


@dataclass(frozen=True)
class Diag:
    """One diagnostic: a 0-based range, a severity, the message and the finding's code."""

    line: int
    column: int
    end_line: int
    end_column: int
    severity: Severity
    message: str
    code: str
    rule: str | None = None
    cell: str | None = None  #: the proof's cells the finding holds in (as ``check`` says them)


@dataclass(frozen=True)
class Location:
    """A place in a file: its path and 0-based line and column."""

    path: Path
    line: int
    column: int


@dataclass(frozen=True)
class Completion:
    label: str
    kind: Literal["fact", "backend", "value", "rule"]
    detail: str


@dataclass(frozen=True)
class Symbol:
    """An entry of a file with an id (a rule, an implication, ...) and where it is written."""

    name: str
    kind: str
    line: int
    column: int
    end_line: int


# --- diagnostics ------------------------------------------------------------------------------


def _base_files(path: Path, policy: Sequence[Path] = ()) -> tuple[list[SourceFile], SourceFile | None]:
    """The files a buffer of *path* is checked on top of, and the one of them it replaces: the
    shipped tables, the default policy, ``$KERNELPOLICY_POLICY``'s files, then *policy* (the
    files the workspace configuration names), as ``check --policy`` layers them."""
    from ..dsl.loader import discover
    from ..errors import KernelPolicyError

    named = tuple(str(p) for p in policy if Path(p).exists())
    try:
        files = discover(named, shipped=True, default_policy=True, environ=True)
    except KernelPolicyError:  # a `$KERNELPOLICY_POLICY` that names nothing: the shipped tables alone
        files = discover(named, shipped=True, default_policy=True, environ=False)
    target = _resolved(path)
    same = next((f for f in files if _resolved(f.path) == target), None)
    return [f for f in files if f is not same], same


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def _case_diags(loc: Located, text: str, path: Path) -> list[Diag]:
    """A case file's shape; when the buffer is the file as saved, what ``kernelpolicy test``
    says of it too (its policy files are named relative to where it is saved), at ``expect``."""
    from ..analysis.cases import case_problem, run_case

    problem = case_problem(loc.data)
    if problem is not None:
        line, col, width = loc.where(())
        return [Diag(line - 1, col - 1, line - 1, col - 1 + width, "error", problem, "case")]
    try:
        saved = path.is_file() and path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        saved = False
    if not saved:
        return []
    result = run_case(path)
    line, col, width = loc.where(("expect",), key=True)
    at = (line - 1, col - 1, line - 1, col - 1 + width)
    return [Diag(*at, "error", f"case `{result.name}`: {why}", "case") for why in result.failures] + (
        [Diag(*at, "error", result.error, "case")] if result.error else []
    )


def _is_case(data: Any) -> bool:
    return isinstance(data, dict) and ("given" in data or "expect" in data) and "rules" not in data


#: A top-level key of a rule or policy file (the schema's ``RuleFileSpec``) or of a case file.
_OUR_KEYS = re.compile(r"^(?:backends|order|rules|implies|unsupported|models|gpus|engine|given|expect)\s*:", re.M)


def is_ours(text: str, path: Path) -> bool:
    """Whether *text* is a rule, policy or case file: one of their top-level keys, the rule
    schema's ``$schema`` line, or a file under ``rules/`` or ``policy/``. An editor sends every
    YAML file; a CI workflow or a Kubernetes manifest gets no diagnostics from here."""
    if _OUR_KEYS.search(text) or "rules.schema.json" in text:
        return True
    target = _resolved(path)
    return any(target.is_relative_to(_resolved(d)) for d in (shipped_rules_dir(), default_policy_dir()))


def diagnose(
    text: str,
    path: Path,
    *,
    coverage: bool = True,
    opened: Mapping[Path, str] | None = None,
    policy: Sequence[Path] = (),
) -> list[Diag]:
    """The diagnostics of *text*, the buffer of the file *path*.

    Nothing for a YAML file that is none of kernelpolicy's (:func:`is_ours`). A YAML syntax
    error is reported at once; otherwise the buffer is checked as ``kernelpolicy
    check FILE`` checks it (with the proof unless *coverage* is false). *opened* maps the paths
    of other open buffers to their text: those among the loaded files are checked as typed;
    *policy*: the policy files the workspace configuration layers on top of the shipped tables.
    """
    from ..analysis.checking import check

    if not is_ours(text, path):
        return []
    try:
        loc = load_located(text, str(path))
    except YamlError as exc:
        return [_from_diagnostic(exc.diagnostic)]
    if _is_case(loc.data):
        return _case_diags(loc, text, path)
    base, same = _base_files(path, policy)
    display = same.display if same is not None else str(path)
    layer = same.layer if same is not None else "policy"
    pinned = {_resolved(p): t for p, t in (opened or {}).items()}
    files = [
        PinnedSource(f.path, f.display, f.layer, pinned[_resolved(f.path)].encode("utf-8", "surrogateescape"))
        if _resolved(f.path) in pinned
        else f
        for f in base
    ]
    files.append(PinnedSource(path, display, layer, text.encode("utf-8", "surrogateescape")))
    report = check(files, coverage=coverage, subject=[display], cache=False, layer=True)
    out: list[Diag] = []
    for f in report.findings:
        message = f.message + (f" (in {f.cell})" if f.cell else "") + (f"\n{f.help}" if f.help else "")
        if f.file == display and f.line > 0:
            line, col = f.line - 1, max(f.column - 1, 0)
            out.append(Diag(line, col, line, col + max(f.span, 1), f.level, message, f.code, f.rule, f.cell))
        elif f.level == "error":  # about the tables this file stands on: at its top, saying where
            where = f"{f.file}:{f.line}: " if f.file else ""
            out.append(Diag(0, 0, 0, 0, f.level, where + message, f.code, f.rule))
    return out


def _from_diagnostic(d: Any) -> Diag:
    line, col = max(d.line - 1, 0), max(d.column - 1, 0)
    return Diag(line, col, line, col + max(d.span, 1), d.level, d.message, d.code, d.rule)


def formatted(text: str, path: Path) -> str | None:
    """*text* as ``kernelpolicy fmt`` writes it; ``None`` where it cannot (not one of our
    files, not YAML yet, no ``fmt`` extra, or a comment fmt cannot keep)."""
    from ..errors import KernelPolicyError
    from ..tools.fmt import FormatError, format_text

    if not is_ours(text, path) or _is_case_text(text):
        return None
    try:
        return format_text(text, file=path)
    except (FormatError, KernelPolicyError):
        return None


def _is_case_text(text: str) -> bool:
    try:
        return _is_case(load_located(text, "buffer").data)
    except YamlError:
        return False


# --- the index: what hover, completion and definition know -------------------------------------


class Index:
    """The shipped tables and the default policy: rules by id, backends, fact keys. Loaded once,
    and again when a file under ``rules/`` or ``policy/`` changes on disk (:meth:`stale`): an
    edit saved there is seen without restarting the server."""

    def __init__(self) -> None:
        from ..dsl.loader import load_policy
        from ..errors import KernelPolicyError

        self.stamp = _stamp()
        try:
            self.policy: Any = load_policy((), environ=False)
        except KernelPolicyError:
            self.policy = None
        self.rules: dict[str, Any] = dict(self.policy.by_id) if self.policy is not None else {}
        self.backends: dict[str, list[Any]] = {}
        if self.policy is not None:
            for entries in self.policy.backends.values():
                for backend in entries.values():
                    self.backends.setdefault(backend.id, []).append(backend)
        self.gpus: tuple[Any, ...] = tuple(self.policy.gpus) if self.policy is not None else ()
        self.models: tuple[Any, ...] = tuple(self.policy.models) if self.policy is not None else ()
        self._compiled: Any = None
        self._fires: dict[str, str | None] = {}

    @property
    def compiled(self) -> Any:
        """The shipped tables' conditions as decision diagrams (:class:`~kernelpolicy.analysis.
        compile.Compiled` over their domain), built when a hover first asks where a rule fires."""
        if self._compiled is None and self.policy is not None:
            from ..analysis.compile import Compiled
            from ..analysis.domain import build_domain

            self._compiled = Compiled(self.policy, build_domain(self.policy))
        return self._compiled

    def fires(self, rule: Any) -> str | None:
        """Where *rule* acts, read from its diagram (never by listing cells): how many cells of
        the domain, on which GPUs (``gpu.sm`` classes) and for which model types, with the
        catalog's models of those types."""
        if rule.id not in self._fires:
            self._fires[rule.id] = _fires(self, rule)
        return self._fires[rule.id]

    def stale(self) -> bool:
        """Whether a file under ``rules/`` or ``policy/`` was added, removed or changed since
        this index was loaded (names, sizes and modification times: a few dozen ``stat`` calls)."""
        return _stamp() != self.stamp

    def path_of(self, display: str) -> Path | None:
        """The file a loaded file's name (``rules/known/marlin.yaml``) stands for."""
        if display.startswith("rules/"):
            return shipped_rules_dir() / display[len("rules/") :]
        if display.startswith("policy/"):
            return default_policy_dir() / display[len("policy/") :]
        p = Path(display)
        return p if p.is_absolute() else None


def _fires(index: Index, rule: Any) -> str | None:
    from ..analysis.domain import OTHER, UNKNOWN

    c: Any = index.compiled
    if c is None or id(index.rules.get(rule.id)) != id(rule):  # (an operator file's copy: not proven here)
        return None
    n = c.effect(rule) if rule.kind in ("deny", "require") else c.active(rule.id)
    path = "moe" if rule.paths and set(rule.paths) <= {"moe", "router"} else "dense"
    m, kinds = c.m, c.kinds(path)
    total, every = c.cells([n], path), c.cells([c.T], path)
    if total == 0:
        return "fires in no cell of the domain"

    def classes(dim: str) -> tuple[list[str], int]:
        lv = c.level_of.get(dim)
        if lv is None:
            return [], 0
        values = c.dims[lv].values
        hit = [
            v.label
            for i, v in enumerate(values)
            if any(m.count(n, {**c.fixed_for(k), lv: i}) for k in kinds if lv not in c.fixed_for(k))
        ]
        return hit, len(values)

    share = f"{100 * total / every:.2g}%" if every else "?"
    kind = "MoE models' cells" if path == "moe" else "cells"
    parts = [f"fires in {_count(total)} of {_count(every)} {kind} ({share})"]
    gpus, of = classes("gpu.sm")
    if gpus:
        sms = [sm for label in gpus for sm in label.split("|")]
        named = [g.name for g in index.gpus if g.sm in sms]
        parts.append(
            ("GPUs: every `gpu.sm`" if len(gpus) == of else "GPUs: " + ", ".join(f"`{sm}`" for sm in sms))
            + (f" ({', '.join(named[:6])}{', ...' if len(named) > 6 else ''})" if named and len(gpus) < of else "")
        )
    types, of = classes("model.type")
    if types and len(types) < of:
        members = [t for label in types for t in label.split("|") if t not in (OTHER, UNKNOWN)]
        catalog = [mo.id for mo in index.models if _model_type(mo) in members]
        parts.append(
            "models: " + ", ".join(f"`{t}`" for t in members)
            + (" and other types" if any(OTHER in label for label in types) else "")
            + (f" (catalog: {', '.join(catalog[:6])}{', ...' if len(catalog) > 6 else ''})" if catalog else "")
        )  # fmt: skip
    elif types:
        parts.append("models: every `model.type`")
    return "; ".join(parts)


def _count(n: int) -> str:
    if n < 10**6:
        return f"{n:,}"
    exp = len(str(n)) - 1
    return f"{n / 10**exp:.1f} x 10^{exp}"


def _model_type(model: Any) -> str | None:
    config = model.config
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    found = text.get("model_type") or config.get("model_type")
    return found if isinstance(found, str) else None


def _stamp() -> tuple[tuple[str, int, int], ...]:
    """The YAML files under the shipped ``rules/`` and ``policy/`` folders, each with its size and
    modification time."""
    out = []
    for root in (shipped_rules_dir(), default_policy_dir()):
        for path in sorted(root.rglob("*.yaml")):
            try:
                st = path.stat()
            except OSError:
                continue
            out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


def word_at(text: str, line: int, column: int) -> str | None:
    """The fact key, rule id or backend id under the 0-based *line* and *column*."""
    lines = text.splitlines()
    if not 0 <= line < len(lines):
        return None
    for m in _WORD.finditer(lines[line]):
        if m.start() <= column <= m.end():
            return m.group().rstrip(":") or None
    return None


def hover(text: str, line: int, column: int, index: Index) -> str | None:
    """Markdown for the word under the cursor: a fact key's documentation, a rule's effect and
    reason, or a backend's catalog entries; ``None`` for anything else."""
    from ..facts.keys import lookup_key

    named = _catalog_name_at(text, line, column, index)
    if named is not None:
        return named
    word = word_at(text, line, column)
    if word is None:
        return None
    key = lookup_key(word)
    if key is not None:
        return _fact_hover(key, index)
    rule = index.rules.get(word) or _local_rule(text, word)
    if rule is not None:
        return rule if isinstance(rule, str) else _rule_hover(rule, index)
    products = [g for g in index.gpus if g.sm == word]
    if products:  # a `gpu.sm` value: the products of the catalog that have it
        return f"**{word}**: " + ", ".join(f"{g.name}" for g in products) + " (rules/gpus.yaml)"
    entries = index.backends.get(word)
    if entries:
        lines = [f"**{word}**: backend"]
        for b in entries:
            lines.append(
                f"- path `{b.path}`: requires {_said(b.requires)}" + (f"; {b.because}" if b.because else "")
                + (f" ({', '.join(b.refs)})" if b.refs else "")
                + f" — {b.origin}"
            )  # fmt: skip
        return "\n".join(lines)
    return None


def _rule_hover(rule: Any, index: Index) -> str:
    effect = f"{rule.kind} " + ", ".join(f"`{b}`" for b in rule.backends)
    paths = f" on {', '.join(rule.paths)}" if rule.paths else ""
    parts = [f"**{rule.id}**: {effect}{paths} ({rule.severity})", f"when {_said(rule.when)}", rule.because]
    where = index.fires(rule)
    if where is not None:
        parts.append(where)
    if rule.until is not None:
        parts.append(f"until {_said(rule.until)}")
    if rule.help:
        parts.append(rule.help)
    if rule.refs:
        parts.append("refs: " + ", ".join(rule.refs))
    parts.append(f"{rule.origin}")
    return "\n\n".join(parts)


def _said(cond: Any) -> str:
    """A condition as the rule files write it, in words (``gpu.sm`` = sm90 and ...)."""
    from ..dsl.conditions import All, Any_, Not, Test

    if isinstance(cond, Test):
        return cond.describe()
    if isinstance(cond, All):
        return " and ".join(_said(c) for c in cond.children) if cond.children else "always"
    if isinstance(cond, Any_):
        return "(" + " or ".join(_said(c) for c in cond.children) + ")"
    if isinstance(cond, Not):
        return f"not ({_said(cond.child)})"
    return str(cond)


def _fact_hover(key: Any, index: Index) -> str:
    """A fact key's documentation, its values, and what sets it: the ``implies`` entries of the
    tables that derive it, and the release data's values for a version."""
    parts = [f"**{key.name}** ({key.kind.value}): {key.doc}"]
    if key.domain:
        parts.append("values: " + ", ".join(f"`{v}`" for v in key.domain))
    releases = release_versions(key.name)
    if releases:
        shown = releases[-8:]
        parts.append(
            "releases in the release data: " + ", ".join(f"`{v}`" for v in shown)
            + (f" (and {len(releases) - len(shown)} older)" if len(releases) > len(shown) else "")
        )  # fmt: skip
    if key.example:
        parts.append(f"example: `{key.example}`")
    setters = [i for i in (index.policy.implications if index.policy is not None else ()) if key.name in i.sets]
    sources = "sources: `--fact`, `KERNELPOLICY_FACTS`, what `explain` reads of the machine, model and engine"
    if setters:
        sources += "; implied by " + ", ".join(f"`{i.id}` ({i.origin})" for i in setters[:5])
        sources += f" and {len(setters) - 5} more" if len(setters) > 5 else ""
    parts.append(sources)
    return "\n\n".join(parts)


def _catalog_name_at(text: str, line: int, column: int, index: Index) -> str | None:
    """Hover for a model id or a GPU name (or alias) of the catalogs written under the cursor."""
    lines = text.splitlines()
    if not 0 <= line < len(lines):
        return None
    written = lines[line]
    names: list[tuple[str, Any]] = [(mo.id, mo) for mo in index.models]
    names += [(n, g) for g in index.gpus for n in (g.name, *g.aliases)]
    for name, entry in sorted(names, key=lambda p: -len(p[0])):
        pattern = r"(?<![A-Za-z0-9_./\-])" + re.escape(name) + r"(?![A-Za-z0-9_./\-])"
        for m in re.finditer(pattern, written):
            if m.start() <= column <= m.end():
                return _model_hover(entry) if hasattr(entry, "config") else _gpu_hover(entry)
    return None


def _model_hover(model: Any) -> str:
    config = model.config
    quant = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else {}
    arch = config.get("architectures") or []
    parts = [f"**{model.id}**: model of the catalog (rules/models.yaml)"]
    parts.append(
        f"`model_type` `{_model_type(model)}`" + (f", {', '.join(f'`{a}`' for a in arch)}" if arch else "")
        + (f"; quantization `{quant.get('quant_method')}`" if quant.get("quant_method") else "; not quantized")
    )  # fmt: skip
    if model.facts:
        parts.append("facts: " + ", ".join(f"`{k}` = `{v}`" for k, v in model.facts.items()))
    if model.source:
        parts.append(f"source: {model.source}")
    if model.refs:
        parts.append("refs: " + ", ".join(model.refs))
    return "\n\n".join(parts)


def _gpu_hover(gpu: Any) -> str:
    parts = [f"**{gpu.name}**: GPU of the catalog (rules/gpus.yaml), `gpu.sm` = `{gpu.sm}`"]
    if gpu.aliases:
        parts.append("also written: " + ", ".join(f"`{a}`" for a in gpu.aliases))
    host = [f"`host.machine` = `{gpu.host_machine}`"] if gpu.host_machine else []
    host += ["unified memory"] if gpu.unified_memory else []
    if host:
        parts.append(", ".join(host))
    if gpu.source:
        parts.append(f"source: {gpu.source}")
    return "\n\n".join(parts)


#: The version fact of each package the engines' release records pin.
_PINNED_KEYS: Mapping[str, str] = {
    "torch": "torch.version",
    "flashinfer-python": "flashinfer.version",
    "nvidia-cutlass-dsl": "cutlass_dsl.version",
    "sgl-deep-gemm": "deep_gemm.version",
    "humming-kernels": "humming.version",
}


def release_versions(key: str) -> list[str]:
    """The releases of the fact *key*'s package the release data knows, oldest first: the
    scanned vLLM and SGLang releases for ``vllm.version``/``sglang.version``; for a package's
    version, the releases the engines pin and those the package scan covers."""
    from packaging.version import InvalidVersion, Version

    from ..releases.packages import CONTENTS_FILE
    from ..releases.sglang.versions import release_records as sglang_records
    from ..releases.vllm.versions import release_records as vllm_records

    engines = {"vllm.version": vllm_records(), "sglang.version": sglang_records()}
    if key in engines:
        return list(engines[key])
    found: set[str] = set()
    for records in engines.values():
        for record in records.values():
            for package, version in (record.get("requires") or {}).items():
                if _PINNED_KEYS.get(package) == key:
                    found.add(str(version))
    try:
        import json

        scanned = json.loads(CONTENTS_FILE.read_text(encoding="utf-8")).get("packages", {})
    except (OSError, ValueError):
        scanned = {}
    for package, versions in scanned.items():
        if _PINNED_KEYS.get(package) == key:
            found.update(str(v) for v in versions)

    def order(v: str) -> tuple[int, Any]:
        try:
            return 0, Version(v)
        except InvalidVersion:
            return 1, v

    return sorted(found, key=order)


def _local_rule(text: str, word: str) -> str | None:
    """Hover for a rule of the buffer itself (not yet loaded anywhere)."""
    try:
        loc = load_located(text, "buffer")
    except YamlError:
        return None
    for entry in _entries(loc):
        if entry.get("id") == word:
            effect = next((f"{k} `{entry[k]}`" for k in _BACKEND_KEYS if k in entry), "")
            return f"**{word}**: {effect}".rstrip(": ") + (f"\n\n{entry['because']}" if "because" in entry else "")
    return None


def _entries(loc: Located) -> list[dict[str, Any]]:
    data = loc.data
    if not isinstance(data, dict):
        return []
    return [e for s in _SECTIONS for e in (data.get(s) or []) if isinstance(e, dict)]


# --- completion ----------------------------------------------------------------------------------

_FLOW_CONDITION = re.compile(r"^\s*(?:-\s+)?(" + "|".join(_CONDITIONS) + r"):\s*\{(?P<inside>[^}]*)$")
_BACKEND_LINE = re.compile(r"^\s*(?:-\s+)?(" + "|".join(_BACKEND_KEYS) + r"):\s*\[?[^\]]*$")
_RULE_LINE = re.compile(r"^\s*(?:-\s+)?overrides:\s*\[?[^\]]*$")
_BLOCK_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.\-]*)$")
_OPENER = re.compile(r"^(?P<indent>\s*)(?:-\s+)?(?P<key>[A-Za-z_]+):\s*(?:#.*)?$")


def _context(text: str, line: int, column: int) -> tuple[str, str | None]:
    """What the cursor is typing: ``("fact", None)``, ``("value", KEY)``, ``("backend", None)``
    or ``("", None)`` for none of them."""
    lines = text.splitlines()
    current = lines[line] if 0 <= line < len(lines) else ""
    before = current[:column]
    m = _FLOW_CONDITION.match(before)
    if m is not None:
        item = re.split(r",", m.group("inside"))[-1]
        if ":" in item:
            return "value", item.split(":", 1)[0].strip()
        return "fact", None
    if _BACKEND_LINE.match(before):
        return "backend", None
    if _RULE_LINE.match(before) or _in_block_list(lines, line, before, "overrides"):
        return "rule", None
    block = re.match(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.\-]+):\s*(?P<value>\S*)$", before)
    bare = _BLOCK_KEY.match(before)
    found = block or bare
    if found is None:
        return "", None
    indent = len(found.group("indent"))
    for prev in reversed(lines[:line]):  # the key this line's mapping belongs to
        if not prev.strip() or prev.lstrip().startswith("#"):
            continue
        prev_indent = len(prev) - len(prev.lstrip())
        if prev_indent >= indent:
            continue
        opener = _OPENER.match(prev)
        if opener is None or opener.group("key") not in _CONDITIONS:
            return "", None
        if block is not None:
            return "value", block.group("key")
        return "fact", None
    return "", None


def _in_block_list(lines: list[str], line: int, before: str, key: str) -> bool:
    """Whether *before* starts an item (``- ``) of the block list under *key*."""
    m = re.match(r"^(?P<indent>\s*)-\s+[A-Za-z0-9_.#\-]*$", before)
    if m is None:
        return False
    indent = len(m.group("indent"))
    for prev in reversed(lines[:line]):
        if not prev.strip() or (prev.lstrip().startswith(("#", "- ")) and len(prev) - len(prev.lstrip()) == indent):
            continue
        opener = _OPENER.match(prev)
        return opener is not None and opener.group("key") == key and len(prev) - len(prev.lstrip()) <= indent
    return False


def completions(text: str, line: int, column: int, index: Index) -> list[Completion]:
    """What may be typed at the cursor: fact keys inside a condition, a fact's values after its
    key, backend ids after ``deny``/``prefer``/``use``/``backend``, the crash rules' and
    catalog requirements' ids after ``overrides`` (only those need naming to be overridden); nothing elsewhere."""
    from ..facts.keys import FACT_KEYS, lookup_key

    what, key = _context(text, line, column)
    if what == "fact":
        return [Completion(k.name, "fact", k.doc) for k in sorted(FACT_KEYS.values(), key=lambda k: k.name)]
    if what == "value" and key is not None:
        fact = lookup_key(key)
        if fact is not None and not fact.domain:  # a version: the releases the release data knows
            releases = release_versions(key)
            return [Completion(v, "value", f"a release of `{key}` (release data)") for v in reversed(releases)]
        return [Completion(v, "value", f"a value of `{key}`") for v in (fact.domain if fact else ())]
    if what == "rule":
        return [
            Completion(r.id, "rule", f"{r.kind} {', '.join(r.backends)}: {r.because}")
            for r in sorted(index.rules.values(), key=lambda r: r.id)
            if r.severity == "crash"
        ] + [
            Completion(b.rule_id, "rule", f"the catalog's requirement of `{b.id}` on `{b.path}`")
            for entries in index.backends.values()
            for b in entries
        ]
    if what == "backend":
        return [
            Completion(b, "backend", "backend on " + ", ".join(sorted({e.path for e in entries})))
            for b, entries in sorted(index.backends.items())
        ]
    return []


# --- definition and symbols ----------------------------------------------------------------------


def symbols(text: str) -> list[Symbol]:
    """The entries of the buffer that have an id (rules, implications, unsupported, order), in
    file order; nothing for a buffer that is not YAML yet."""
    try:
        loc = load_located(text, "buffer")
    except YamlError:
        return []
    out: list[Symbol] = []
    data = loc.data
    if not isinstance(data, dict):
        return []
    for section, kind in _SECTIONS.items():
        items = data.get(section)
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                continue
            line, col, _w = loc.where((section, i, "id"))
            start = loc.where((section, i), key=False)
            end = _last_line(loc, (section, i))
            out.append(Symbol(item["id"], kind, start[0] - 1, max(col - 1, 0), max(end, line) - 1))
    return sorted(out, key=lambda s: s.line)


def _last_line(loc: Located, prefix: tuple[str | int, ...]) -> int:
    n = len(prefix)
    return max((p[0] for k, p in loc.positions.items() if k[:n] == prefix), default=1)


def definition(
    text: str, line: int, column: int, index: Index, opened: Mapping[Path, str] | None = None
) -> Location | None:
    """Where the rule id under the cursor is written: an open buffer first (as typed), then the
    shipped tables and the default policy."""
    word = word_at(text, line, column)
    if word is None:
        return None
    for path, other in (opened or {}).items():
        for s in symbols(other):
            if s.name == word:
                return Location(path, s.line, s.column)
    rule = index.rules.get(word)
    if rule is None:
        return None
    file = index.path_of(rule.origin.file)
    if file is None:
        return None
    try:
        written = symbols(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        written = []
    return next(
        (Location(file, s.line, s.column) for s in written if s.name == word),
        Location(file, max(rule.origin.line - 1, 0), 0),
    )


def references(
    text: str,
    line: int,
    column: int,
    path: Path,
    index: Index,
    opened: Mapping[Path, str] | None = None,
    policy: Sequence[Path] = (),
) -> list[Location]:
    """Every place the rule id under the cursor is written (its entry, ``overrides``, comments)
    in the buffer, the other open buffers, and the files the buffer is checked on top of;
    nothing for a word that is no rule id here or there."""
    word = word_at(text, line, column)
    if word is None:
        return []
    if word not in index.rules and word not in {s.name for s in symbols(text)}:
        return []
    texts: dict[Path, str] = {_resolved(p): t for p, t in (opened or {}).items()}
    texts[_resolved(path)] = text
    base, _same = _base_files(path, policy)
    for f in base:
        key = _resolved(f.path)
        if key not in texts:
            try:
                texts[key] = f.read_text()
            except SourceError:  # an unreadable file has no references to show
                continue
    pattern = re.compile(r"(?<![A-Za-z0-9_.#\-])" + re.escape(word) + r"(?![A-Za-z0-9_.#\-])")
    out: list[Location] = []
    for where, body in texts.items():
        for n, written in enumerate(body.splitlines()):
            out += [Location(where, n, m.start()) for m in pattern.finditer(written)]
    return out
