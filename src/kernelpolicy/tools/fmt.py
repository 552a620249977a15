"""The canonical layout of rule and policy files (``kernelpolicy fmt``), comments kept.

- sections in the order of :class:`~kernelpolicy.dsl.schema.RuleFileSpec`, and the keys of each
  entry in the order of its model's fields (``id``, ``when``, the effect, ``severity``,
  ``because``, ``refs``, ...): the models are the one source of that order;
- conditions (``when``, ``unless``, ``until``, ``require``, ``requires``, ``set``) in flow style
  when they are flat and short, lists of scalars (``refs``, ``paths``, ``deny``) in flow style
  when short, everything else in block style, indented by two;
- a ``# yaml-language-server: $schema=...`` first line naming the rules schema, so editors
  complete and check the file: kept when present, else added when a ``schemas/`` folder with
  the schema is found above the file, or when one is given.

:func:`format_text` is idempotent: formatting its output changes nothing. It needs
``ruamel.yaml`` (``pip install 'kernelpolicy[fmt]'``), the YAML library that keeps comments.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any, Final

from ..errors import Diagnostic, PolicyError, UsageError

__all__ = ["SCHEMA_HEADER", "FormatError", "find_schema", "format_text"]

SCHEMA_HEADER: Final = "# yaml-language-server: $schema="
_FLOW_KEYS: Final = frozenset({"when", "unless", "until", "require", "requires", "set"})
_MAX_FLOW: Final = 100  #: the longest condition or list written on one line
#: Keys that lead an entry, before the rest in the model's field order: what it is about first.
_LEAD: Final = {"rules": ("id", "when", "backend", "paths")}


class FormatError(UsageError):
    """A file that cannot be formatted (not YAML, or ruamel.yaml is missing)."""


def _orders() -> dict[str, list[str]]:
    """Section name -> the key order of its entries, from the pydantic models."""
    from ..dsl.schema import RuleFileSpec

    out: dict[str, list[str]] = {"": list(RuleFileSpec.model_fields)}
    for name, field in RuleFileSpec.model_fields.items():
        ann = field.annotation
        args = getattr(ann, "__args__", None) or (ann,)
        model = next((a for a in args if hasattr(a, "model_fields")), None)
        if model is not None:
            fields = [f.alias or k for k, f in model.model_fields.items()]
            lead = [k for k in _LEAD.get(name, ()) if k in fields]
            out[name] = lead + [k for k in fields if k not in lead]
    return out


def _reorder(m: Any, order: list[str]) -> None:
    rank = {k: i for i, k in enumerate(order)}
    for key in sorted(m.keys(), key=lambda k: (rank.get(k, len(rank)), list(m.keys()).index(k))):
        m.move_to_end(key)


def _has_comments(node: Any) -> bool:
    ca = getattr(node, "ca", None)
    return bool(ca and (ca.items or ca.comment))


def _flow_len(node: Any) -> int:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        return sum(len(str(k)) + 2 + _flow_len(v) + 2 for k, v in node.items()) + 2
    if isinstance(node, CommentedSeq):
        return sum(_flow_len(v) + 2 for v in node) + 2
    return len(str(node)) + 2


def _is_flat(node: Any) -> bool:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        return all(not isinstance(v, CommentedMap) and _is_flat(v) for v in node.values())
    if isinstance(node, CommentedSeq):
        return all(not isinstance(v, (CommentedMap, CommentedSeq)) for v in node)
    return True


def _style(node: Any, key: str | None = None, condition: bool = False) -> None:
    """Flow style for flat, short conditions (and the parts of ``all``/``any``/``not``) and
    short lists of scalars; block style for everything else."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    condition = condition or key in _FLOW_KEYS
    keep = _has_comments(node)  # a node with comments keeps its style: the comments stay where they are
    if isinstance(node, CommentedMap):
        flow = condition and _is_flat(node) and not keep and _flow_len(node) <= _MAX_FLOW
        if flow:
            node.fa.set_flow_style()
        elif not keep:
            node.fa.set_block_style()
        for k, v in node.items():
            _style(v, str(k), condition)
            if flow and isinstance(v, (CommentedMap, CommentedSeq)):
                v.fa.set_flow_style()
    elif isinstance(node, CommentedSeq):
        scalars = all(not isinstance(v, (CommentedMap, CommentedSeq)) for v in node)
        if keep:
            pass
        elif scalars and node and _flow_len(node) <= _MAX_FLOW:
            node.fa.set_flow_style()
        else:
            node.fa.set_block_style()
        if not (scalars and node.fa.flow_style()):
            for v in node:
                _style(v, None, condition)


def _yaml() -> Any:
    try:
        from ruamel.yaml import YAML
    except ImportError:
        raise FormatError("`kernelpolicy fmt` needs ruamel.yaml", help="pip install 'kernelpolicy[fmt]'") from None
    y = YAML(typ="rt")
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096  # never re-wrap a `because`
    y.preserve_quotes = True
    return y


def _same_data(a: str, b: str) -> bool:
    import yaml

    try:
        return bool(yaml.safe_load(a) == yaml.safe_load(b))
    except yaml.YAMLError:
        return False


def find_schema(file: Path) -> Path | None:
    """``schemas/rules.schema.json`` in the nearest folder above *file* that has one."""
    for folder in file.resolve().parents:
        candidate = folder / "schemas" / "rules.schema.json"
        if candidate.is_file():
            return candidate
    return None


def _header_for(file: Path | None, schema: str | None) -> str | None:
    if schema is not None:
        return schema
    if file is None:
        return None
    found = find_schema(file)
    if found is None:
        return None
    return Path(os.path.relpath(found, file.resolve().parent)).as_posix()


def format_text(text: str, *, file: Path | None = None, schema: str | None = None) -> str:
    """*text* (a rule or policy file) in the canonical layout.

    *schema* sets the ``$schema`` header; without it an existing header is kept, or one is
    added pointing at the ``schemas/`` folder above *file* (a relative path).

    :raises PolicyError: naming the file, line and column when *text* is not YAML.
    :raises FormatError: when ruamel.yaml is missing, or formatting would change the data.
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.error import MarkedYAMLError

    y = _yaml()
    lines = text.splitlines()
    header = lines[0][len(SCHEMA_HEADER) :].strip() if lines and lines[0].startswith(SCHEMA_HEADER) else None
    body = "\n".join(lines[1:]) + "\n" if header is not None else text
    where = str(file) if file else "<text>"
    try:
        data = y.load(body)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = (mark.line + 1 + (header is not None)) if mark is not None else 0
        column = mark.column + 1 if mark is not None else 0
        diag = Diagnostic(f"not valid YAML: {exc.problem}", file=where, line=line, column=column, code="yaml")
        raise PolicyError([diag]) from None
    header = schema if schema is not None else header or _header_for(file, None)
    if isinstance(data, CommentedMap):
        orders = _orders()
        _reorder(data, orders[""])
        for section, value in data.items():
            entries = value if isinstance(value, CommentedSeq) else [value]
            for entry in entries:
                if isinstance(entry, CommentedMap) and section in orders:
                    _reorder(entry, orders[section])
            _style(value, str(section))
    out = io.StringIO()
    if data is not None:
        y.dump(data, out)
    result = re.sub(r"[ \t]+\n", "\n", out.getvalue()).rstrip("\n") + "\n"
    if not _same_data(body, result):  # never change what a file says, only how it looks
        raise FormatError(f"{where}: formatting would change its data (a kernelpolicy bug): left as it is")
    if header:
        result = f"{SCHEMA_HEADER}{header}\n" + result
    return result
