"""The canonical layout of rule and policy files (``kernelpolicy fmt``), comments kept.

- sections in the order of :class:`~kernelpolicy.dsl.schema.RuleFileSpec`, and the keys of each
  entry in the order of its model's fields (``id``, ``when``, the effect, ``severity``,
  ``because``, ``refs``, ...): the models are the one source of that order;
- conditions (``when``, ``unless``, ``until``, ``require``, ``requires``, ``set``) in flow style
  when they are flat and short, lists of scalars (``refs``, ``paths``, ``deny``) in flow style
  when short, everything else in block style, indented by two;
- a ``# yaml-language-server: $schema=...`` first line naming the rules schema, so editors
  complete and check the file: the one given (``--schema URI``; ``none``: no line), else the one
  present, else the ``schemas/`` folder found above the file (a relative path, valid in every
  clone). Never an absolute path of this machine (a venv, a pre-commit cache), which would be
  committed into the operator's repository and name nothing on any other machine: such a line
  is replaced by the relative one, or dropped where no ``schemas/`` folder is above the file
  (``kernelpolicy schema --write schemas`` puts one there).

:func:`format_text` is idempotent: formatting its output changes nothing. It never loses
content: the data must read the same after, every comment must still be there (a comment
inside a flow collection, ``{a: b,  # why``, which the YAML library cannot keep, makes it
refuse the file with the comment's line), and a file with no YAML document (only comments) is
left as it is. It needs ``ruamel.yaml`` (the ``fmt`` extra), the YAML library
that keeps comments.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any, Final

from ..errors import Diagnostic, PolicyError, UsageError

__all__ = ["NO_SCHEMA", "SCHEMA_HEADER", "FormatError", "find_schema", "format_text", "machine_private"]

SCHEMA_HEADER: Final = "# yaml-language-server: $schema="
#: ``--schema none``: no ``$schema`` line (an existing one is removed).
NO_SCHEMA: Final = "none"
#: An absolute path of this machine: ``/...``, ``~/...``, ``file:...``, ``C:\...``.
_PRIVATE: Final = re.compile(r"(?:/|~|file:|[A-Za-z]:[\\/])", re.I)
_FLOW_KEYS: Final = frozenset({"when", "unless", "until", "require", "requires", "set"})
_MAX_FLOW: Final = 100  #: the longest condition or list written on one line
#: The most YAML values ``fmt`` lays out: its round-trip library takes about 0.15 ms of CPU a
#: value, so 60,000 top-level keys took 9.5 s and 40,000 flow entries on one line over a minute
#: (hostile round four). The largest shipped table holds about 1,500; 20,000 is some 2,000 rules.
MAX_VALUES: Final = 20_000
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
    keys = list(m.keys())
    wanted = sorted(keys, key=lambda k: rank.get(k, len(rank)))  # stable: the rest keep their order
    if wanted != keys:
        for key in wanted:
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


def _commented_flow(parent: Any, where: object, child: Any) -> bool:
    """Whether *child* (at *where* in *parent*) is a flow collection with a comment after it,
    held by *parent*: ruamel.yaml cannot turn such a one into block style (it would write the
    comment where the first key goes), so it keeps its style."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if not isinstance(child, (CommentedMap, CommentedSeq)) or not child.fa.flow_style():
        return False
    ca = getattr(parent, "ca", None)
    entry = ca.items.get(where) if ca is not None else None
    # the comment on the child's own line: slot 0 of a sequence item, slot 2 of a mapping value
    slot = 0 if isinstance(parent, CommentedSeq) else 2
    return bool(entry and len(entry) > slot and entry[slot] is not None)


def _style(node: Any, key: str | None = None, condition: bool = False, keep: bool = False) -> None:
    """Flow style for flat, short conditions (and the parts of ``all``/``any``/``not``) and
    short lists of scalars; block style for everything else."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    condition = condition or key in _FLOW_KEYS
    keep = keep or _has_comments(node)  # a node with comments keeps its style: the comments stay where they are
    if isinstance(node, CommentedMap):
        flow = condition and _is_flat(node) and not keep and _flow_len(node) <= _MAX_FLOW
        if flow:
            node.fa.set_flow_style()
        elif not keep:
            node.fa.set_block_style()
        for k, v in node.items():
            _style(v, str(k), condition, _commented_flow(node, k, v))
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
            for i, v in enumerate(node):
                _style(v, None, condition, _commented_flow(node, i, v))


def _yaml() -> Any:
    try:
        from ruamel.yaml import YAML
    except ImportError:
        from .._install import install_command

        raise FormatError("`kernelpolicy fmt` needs ruamel.yaml", help=install_command("fmt")) from None
    y = YAML(typ="rt")
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096  # never re-wrap a `because`
    y.preserve_quotes = True
    return y


def _same_data(a: str, b: str) -> bool:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the pure-Python one took 12 s for 3,000 rules
    try:
        return bool(yaml.load(a, Loader=loader) == yaml.load(b, Loader=loader))
    except yaml.YAMLError:
        return False


def _comments(text: str) -> list[tuple[int, str]]:
    """Pure: every comment of the YAML *text*, as (line, text without trailing blanks): a ``#``
    at a line's start or after a blank that no scalar (quoted, plain or block) holds."""
    import bisect

    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    spans: list[tuple[int, int]] = []
    try:
        for tok in yaml.scan(text, Loader=loader):
            if isinstance(tok, yaml.ScalarToken):
                spans.append((tok.start_mark.index, tok.end_mark.index))
    except yaml.YAMLError:
        return []  # not YAML: the caller's own load says where
    starts = [a for a, _ in spans]
    out: list[tuple[int, str]] = []
    for m in re.finditer(r"(?:^|(?<=[ \t]))#[^\n]*", text, re.M):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0 and spans[i][0] <= m.start() < spans[i][1]:
            continue  # inside a scalar: `a#b`, "x # y", a literal block
        out.append((text.count("\n", 0, m.start()) + 1, m.group().rstrip()))
    return out


def _lost_comment(before: str, after: str) -> tuple[int, str] | None:
    """The first comment of *before* that *after* no longer has, or ``None``."""
    from collections import Counter

    left = Counter(c for _, c in _comments(after))
    for line, c in _comments(before):
        if left[c] <= 0:
            return line, c
        left[c] -= 1
    return None


def find_schema(file: Path) -> Path | None:
    """``schemas/rules.schema.json`` in the nearest folder above *file* that has one."""
    for folder in file.resolve().parents:
        candidate = folder / "schemas" / "rules.schema.json"
        if candidate.is_file():
            return candidate
    return None


def machine_private(uri: str) -> bool:
    """Whether a ``$schema`` value is an absolute path of this machine (valid nowhere else)."""
    return bool(_PRIVATE.match(uri))


def _header_for(file: Path | None) -> str | None:
    """The relative path from *file* to the ``schemas/`` folder above it, or None."""
    if file is None:
        return None
    found = find_schema(file)
    return None if found is None else Path(os.path.relpath(found, file.resolve().parent)).as_posix()


_SCHEMA_URI: Final = re.compile(r"[^\s\x00-\x1f\x7f]{1,2000}\Z")


def _check_schema(uri: str) -> str:
    if not _SCHEMA_URI.match(uri):
        raise FormatError(f"--schema `{uri!r}`: a URI or path on one line, without blanks or control characters")
    return uri


def _layout(y: Any, data: Any, body: str) -> str:
    """One formatting pass over the loaded *data* of *body* (see :func:`format_text`)."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

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
    y.dump(data, out)
    dumped = out.getvalue().rstrip("\n") + "\n"
    result = re.sub(r"[ \t]+\n", "\n", dumped)
    if result != dumped and not _same_data(body, result):
        result = dumped  # the blanks were inside a scalar (a literal block's line ends): keep them
    return result


def _guard(text: str, where: str) -> None:
    """Read *text* as the loader reads rule files first, with its guards: an anchor or alias (a
    bomb of nine aliases of nine took ruamel.yaml minutes), nesting deeper than the loader's
    bound, a tag, a NUL or other character YAML refuses, a file over the size bound, more values
    than :data:`MAX_VALUES`, are one error naming the place, before the round-trip library sees
    the file.

    :raises PolicyError: what the loader would say.
    """
    from ..dsl.files import YamlError, load_located

    try:
        located = load_located(text, where)
    except YamlError as exc:
        raise PolicyError([exc.diagnostic]) from None
    except RecursionError:  # deeper than the YAML library itself nests
        raise PolicyError([Diagnostic("invalid YAML: nested too deeply", file=where, code="yaml")]) from None
    if len(located.positions) > MAX_VALUES:
        message = f"{len(located.positions):,} YAML values, more than fmt lays out ({MAX_VALUES:,}): left as it is"
        raise PolicyError([Diagnostic(message, file=where, code="too-large", help="split the file")])


def format_text(text: str, *, file: Path | None = None, schema: str | None = None) -> str:
    """*text* (a rule or policy file) in the canonical layout.

    *schema* sets the ``$schema`` header (:data:`NO_SCHEMA`: none); without it an existing header
    is kept, or one is added pointing at the ``schemas/`` folder above *file* (a relative path);
    a header that is an absolute path of this machine is replaced by that one, or dropped.

    :raises PolicyError: naming the file, line and column when *text* is not YAML.
    :raises FormatError: when ruamel.yaml is missing, or formatting would change the data.
    """
    y = _yaml()  # first: without ruamel.yaml, the install line
    from ruamel.yaml.error import MarkedYAMLError

    if schema is not None and schema != NO_SCHEMA:
        _check_schema(schema)
    lines = text.splitlines()
    header = lines[0][len(SCHEMA_HEADER) :].strip() if lines and lines[0].startswith(SCHEMA_HEADER) else None
    body = "\n".join(lines[1:]) + "\n" if header is not None else text
    where = str(file) if file else "<text>"
    _guard(text, where)
    try:
        data = y.load(body)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = (mark.line + 1 + (header is not None)) if mark is not None else 0
        column = mark.column + 1 if mark is not None else 0
        diag = Diagnostic(f"not valid YAML: {exc.problem}", file=where, line=line, column=column, code="yaml")
        raise PolicyError([diag]) from None
    if data is None:
        return text  # no YAML document (only comments, or nothing): nothing to lay out
    had_header = header is not None
    if schema is not None:
        header = None if schema == NO_SCHEMA else schema
    elif header is None or machine_private(header):
        header = _header_for(file)
    result = _layout(y, data, body)
    settled = result == body  # the file is laid out already: one pass showed it
    for _ in range(0 if settled else 2):  # where the library moved a comment, a second pass settles it
        if not _same_data(body, result):
            settled = True
            break  # said below
        again = _layout(y, y.load(result), result)
        if again == result:
            settled = True
            break
        result = again
    if not settled:
        raise FormatError(f"{where}: the layout does not settle (a kernelpolicy bug): left as it is")
    if result != body and not _same_data(body, result):  # never change what a file says, only how it looks
        raise FormatError(f"{where}: formatting would change its data (a kernelpolicy bug): left as it is")
    lost = _lost_comment(body, result)
    if lost is not None:
        line = lost[0] + had_header
        raise FormatError(
            f"{where}:{line}: formatting would drop the comment `{lost[1]}`: left as it is",
            help="put the comment on a line of its own, outside `{...}` and `[...]`",
        )
    if header:
        result = f"{SCHEMA_HEADER}{header}\n" + result
    return result
