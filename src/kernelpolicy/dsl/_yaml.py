"""Safe YAML reading that keeps every value's position in the source.

Only plain YAML data is accepted: no tags other than the standard scalar ones, no anchors or
aliases (they make alias bombs possible and are never needed in rule files), no duplicate
keys (PyYAML would keep the last one silently), and no file over :data:`MAX_BYTES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import yaml

from ..errors import Diagnostic
from ._source import MAX_BYTES

__all__ = ["MAX_BYTES", "Located", "Position", "YamlError", "load_located"]

MAX_DEPTH: Final = 64
_STD_TAGS: Final = frozenset(
    {
        "tag:yaml.org,2002:str",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:map",
        "tag:yaml.org,2002:seq",
    }
)

Position = tuple[int, int, int]  # line, column (both 1-based), width of the token
PathKey = tuple[str | int, ...]


@dataclass(frozen=True)
class Located:
    """Plain data read from a file, and the position of each value and mapping key."""

    data: Any
    positions: dict[PathKey, Position]
    key_positions: dict[PathKey, Position]
    lines: tuple[str, ...]

    def where(self, path: PathKey, *, key: bool = False) -> Position:
        """The closest known position of *path* (the key's position with ``key=True``)."""
        table = self.key_positions if key else self.positions
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if not key and probe in self.key_positions:
                return self.key_positions[probe]
            probe = probe[:-1]
        return self.positions.get((), (1, 1, 1))

    def line_text(self, line: int) -> str | None:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else None


class YamlError(Exception):
    """A file that is not plain, safe YAML data."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        self.diagnostic = diagnostic
        super().__init__(diagnostic.one_line())


class _NoAliasLoader(yaml.SafeLoader):
    """Composes nodes only; anchors and aliases are refused before they expand."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases are not allowed in rule files", event.start_mark
            )
        event = self.peek_event()  # type: ignore[no-untyped-call]
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases are not allowed in rule files", event.start_mark
            )
        return super().compose_node(parent, index)


#: libyaml's composer when PyYAML has it (10x faster); aliases are then refused in ``build``
_COMPOSER: Any = getattr(yaml, "CSafeLoader", None) or _NoAliasLoader


def _pos(mark: Any, end: Any | None = None) -> Position:
    width = 1
    if end is not None and end.line == mark.line:
        width = max(end.column - mark.column, 1)
    return (mark.line + 1, mark.column + 1, width)


def _syntax_error(message: str, filename: str, lines: tuple[str, ...], line: int, col: int) -> YamlError:
    source = lines[line - 1] if 0 < line <= len(lines) else None
    return YamlError(Diagnostic(message, file=filename, line=line, column=col, code="yaml", source_line=source))


def load_located(text: str, filename: str) -> Located:
    """Parse *text* (the contents of *filename*) into plain data with positions.

    :raises YamlError: on a syntax error, a disallowed construct, or an oversized file.
    """
    lines = tuple(text.splitlines())
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise YamlError(
            Diagnostic(
                f"file is larger than {MAX_BYTES} bytes",
                file=filename,
                code="too-large",
                help="split rule files; nothing this large is a rule table",
            )
        )
    try:
        node = yaml.compose(text, Loader=_COMPOSER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        raise _syntax_error(f"invalid YAML: {problem}", filename, lines, line, col) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        before = text[: max(exc.position, 0)]
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        message = f"invalid YAML: character {exc.character!r} is not allowed"
        raise _syntax_error(message, filename, lines, line, col) from None
    except yaml.YAMLError as exc:
        raise YamlError(Diagnostic(f"invalid YAML: {exc}", file=filename, code="yaml")) from None

    positions: dict[PathKey, Position] = {}
    key_positions: dict[PathKey, Position] = {}

    def fail(message: str, n: Any, help: str | None = None) -> YamlError:
        line, col, width = _pos(n.start_mark, n.end_mark)
        return YamlError(
            Diagnostic(
                message,
                file=filename,
                line=line,
                column=col,
                code="yaml",
                help=help,
                source_line=lines[line - 1] if 0 < line <= len(lines) else None,
                span=width,
            )
        )

    constructor = yaml.SafeLoader("")
    seen: set[int] = set()

    def build(n: Any, path: PathKey, depth: int) -> Any:
        if id(n) in seen:  # the composer shares the node of an anchor with each alias
            raise fail("anchors and aliases are not allowed in rule files", n)
        if isinstance(n, (yaml.MappingNode, yaml.SequenceNode)):
            seen.add(id(n))
        if depth > MAX_DEPTH:
            raise fail(f"nesting deeper than {MAX_DEPTH} levels", n)
        if n.tag not in _STD_TAGS:
            raise fail(
                f"tag `{n.tag}` is not allowed",
                n,
                help="rule files hold plain data: strings, numbers, booleans, lists and mappings",
            )
        positions[path] = _pos(n.start_mark, n.end_mark)
        if isinstance(n, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode) or k.tag not in _STD_TAGS:
                    raise fail("mapping keys must be plain scalars", k)
                key = constructor.construct_object(k)
                if not isinstance(key, str):
                    key = str(key).lower() if isinstance(key, bool) else str(key)
                if key in out:
                    raise fail(f"duplicate key `{key}`", k, help="a later key would silently win")
                key_positions[(*path, key)] = _pos(k.start_mark, k.end_mark)
                out[key] = build(v, (*path, key), depth + 1)
            return out
        if isinstance(n, yaml.SequenceNode):
            return [build(v, (*path, i), depth + 1) for i, v in enumerate(n.value)]
        return constructor.construct_object(n)

    data = None if node is None else build(node, (), 0)
    return Located(data, positions, key_positions, lines)
