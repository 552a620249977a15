"""Read where an SGLang release sets its MoE runner by itself (per model architecture, GPU and
quantization), and write ``overrides.json`` beside this module.

``python -m kernelpolicy.releases.sglang._overrides WHEEL... [--out FILE]`` parses the wheel's
``.py`` files with :mod:`ast` (nothing is imported) and lists, per release, every place where
SGLang's config-time resolution gives ``moe_runner_backend`` a value of its own: an
``overrides["moe_runner_backend"] = "X"`` or ``{"moe_runner_backend": "X"}`` of a model override
(``arg_groups/model_overrides/*.py``, 0.5.19+), a ``declare_resolution(..., moe_runner_backend="X")``,
or ``self.moe_runner_backend = "X"`` in ``ServerArgs`` (0.5.12-0.5.18). Each entry keeps the
architectures its function is registered for (``@_register_for(...)``) and the tests of every
``if`` around it as SGLang writes them (an ``else`` branch as ``not (...)``), with the local
names those tests read and what each was last assigned before; and the branches of
``_dispatch_auto_backend`` (``layers/quantization/fp8_utils.py``), SGLang's automatic choice of a
block-FP8 linear kernel, in order. The attention backend (issue #39) is read the same way: every
place resolution gives ``attention_backend`` (or its per-phase ``prefill_``/``decode_`` fields) a
value of its own, and each ``return`` of SGLang's automatic choice (``get_default_attn_backend``)
with the tests around it. What the tests mean in kernelpolicy's facts is :mod:`.generate`'s
business, not the scan's.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from packaging.version import Version

__all__ = ["ATTENTION_FIELDS", "OVERRIDES_FILE", "main", "scan_overrides"]

#: Written by :func:`main` from each release's wheel, never edited.
OVERRIDES_FILE: Final = Path(__file__).with_name("overrides.json")
#: The ``ServerArgs`` field whose automatic values are read.
FIELD: Final = "moe_runner_backend"
#: Where config-time resolution lives: ``ServerArgs`` (every release) and the argument groups.
_FILES: Final = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/")
#: Where the architecture lists those files import live (``MIMO_V2_MODEL_ARCHS``, ...).
_CONSTANT_FILES: Final = ("sglang/srt/configs/model_config.py",)
_REGISTER: Final = "_register_for"


#: The attention fields whose automatic values are read (issue #39): the base backend and the
#: per-phase ones that win over it.
ATTENTION_FIELDS: Final = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")
#: SGLang's automatic attention choice: ``ServerArgs._get_default_attn_backend`` (0.5.12-0.5.19)
#: or ``get_default_attn_backend`` (``arg_groups/model_override_base.py``, 0.5.20+).
_DEFAULT_ATTENTION: Final = ("get_default_attn_backend", "_get_default_attn_backend")


def _field_of(node: ast.expr, fields: tuple[str, ...]) -> str | None:
    """The field of *fields* that ``x["field"]`` or ``x.field`` names."""
    if isinstance(node, ast.Subscript):
        key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        return key if isinstance(key, str) and key in fields else None
    return node.attr if isinstance(node, ast.Attribute) and node.attr in fields else None


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _sets(stmt: ast.stmt, fields: tuple[str, ...] = (FIELD,)) -> Iterator[tuple[str, int, str]]:
    """The values *stmt* itself gives one of *fields* (not its nested blocks), with their lines
    and the field."""
    if isinstance(stmt, ast.Assign) and (value := _string(stmt.value)) is not None:
        for t in stmt.targets:
            if (field := _field_of(t, fields)) is not None:
                yield value, stmt.lineno, field
    exprs: list[ast.expr] = []
    if isinstance(stmt, (ast.Expr, ast.Return, ast.Assign)) and stmt.value is not None:
        exprs.append(stmt.value)
    for expr in exprs:
        if isinstance(expr, ast.Call):
            for kw in expr.keywords:
                if kw.arg in fields and (value := _string(kw.value)) is not None:
                    yield value, expr.lineno, kw.arg
        if isinstance(expr, ast.Dict):
            for k, v in zip(expr.keys, expr.values, strict=True):
                if (key := _string(k)) is not None and key in fields and (value := _string(v)) is not None:
                    yield value, expr.lineno, key


def _registered(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    out: list[str] = []
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name) and dec.func.id == _REGISTER:
            out += [s for a in dec.args if (s := _string(a)) is not None]
    return out


def _alternatives(expr: ast.expr) -> list[tuple[str, list[ast.expr]]]:
    """The strings *expr* can be, each with the tests under which it is (``"a" if t else "b"``)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [(expr.value, [])]
    if isinstance(expr, ast.IfExp):
        yes = [(v, [expr.test, *t]) for v, t in _alternatives(expr.body)]
        return yes + [(v, [ast.UnaryOp(ast.Not(), expr.test), *t]) for v, t in _alternatives(expr.orelse)]
    return []


class _Walker:
    """Walks one function's statements with the ``if`` tests that hold around each."""

    def __init__(
        self,
        file: str,
        qualname: str,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        constants: dict[str, list[str]],
        fields: tuple[str, ...] = (FIELD,),
    ) -> None:
        self.file, self.qualname, self.fn, self.constants = file, qualname, fn, constants
        self.fields = fields
        self.archs = _registered(fn)
        self.found: list[dict[str, Any]] = []
        #: local name -> (string, tests) of each assignment of a string to it (attention fields)
        self.sites: dict[str, list[tuple[str, list[ast.expr]]]] = {}
        self.assigned: dict[str, list[tuple[int, str]]] = {}  # local name -> (line, source) of each assignment

    def run(self) -> list[dict[str, Any]]:
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for name in [n for n in ast.walk(t) if isinstance(n, ast.Name)]:
                        value = node.value
                        self.assigned.setdefault(name.id, []).append((node.lineno, ast.unparse(value)))
        self.block(self.fn.body, [])
        return self.found

    def block(self, body: list[ast.stmt], tests: list[ast.expr]) -> None:
        tests = list(tests)
        for stmt in body:
            if self.fields != (FIELD,) and isinstance(stmt, ast.Assign):
                self.through_names(stmt, tests)
            for value, line, field in _sets(stmt, self.fields):
                entry = self.entry(value, line, tests)
                if self.fields != (FIELD,):
                    entry["field"] = field
                self.found.append(entry)
            if isinstance(stmt, ast.If):
                self.block(stmt.body, [*tests, stmt.test])
                self.block(stmt.orelse, [*tests, ast.UnaryOp(ast.Not(), stmt.test)])
                if not stmt.orelse and stmt.body and isinstance(stmt.body[-1], (ast.Return, ast.Raise)):
                    tests.append(ast.UnaryOp(ast.Not(), stmt.test))  # a guard: what follows runs only past it
            elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
                for field in ("body", "orelse", "finalbody"):
                    self.block(getattr(stmt, field, []) or [], tests)
                for handler in getattr(stmt, "handlers", []) or []:
                    self.block(handler.body, tests)

    def through_names(self, stmt: ast.Assign, tests: list[ast.expr]) -> None:
        """The attention fields set from a local name (``overrides["attention_backend"] = backend``):
        each string the name was given before (``backend = "fa3"``, ``a, b = "fa3", "sm90"``,
        ``x = "a" if t else "b"``), with the tests around that assignment and this one."""
        for target in stmt.targets:
            pairs: list[tuple[ast.expr, ast.expr]] = [(target, stmt.value)]
            if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                pairs = list(zip(target.elts, stmt.value.elts, strict=False))
            for name, value in pairs:
                if isinstance(name, ast.Name):
                    for got, extra in _alternatives(value):
                        self.sites.setdefault(name.id, []).append((got, [*tests, *extra]))
        field = next((f for t in stmt.targets if (f := _field_of(t, self.fields)) is not None), None)
        if field is None or not isinstance(stmt.value, ast.Name):
            return
        for string, site in self.sites.get(stmt.value.id, []):
            seen = {ast.unparse(t) for t in site}
            both = [*site, *(t for t in tests if ast.unparse(t) not in seen)]
            entry = self.entry(string, stmt.lineno, both)
            entry["field"] = field
            self.found.append(entry)

    def entry(self, value: str, line: int, tests: list[ast.expr]) -> dict[str, Any]:
        names = sorted({n.id for t in tests for n in ast.walk(t) if isinstance(n, ast.Name)})
        local: dict[str, list[str]] = {}
        for name in names:
            before = [src for at, src in self.assigned.get(name, []) if at < line]
            if before:
                local[name] = before
            elif name in self.constants:
                local[name] = [repr(self.constants[name])]
        return {
            "value": value,
            "file": self.file,
            "function": self.qualname,
            "line": line,
            "architectures": self.archs,
            "tests": [ast.unparse(t) for t in tests],
            "locals": local,
        }


def _chain(body: list[ast.stmt], tests: list[ast.expr], out: list[dict[str, Any]]) -> None:
    """The string returns of *body* in code order, each with the tests of the ``if`` blocks it is
    in (an ``else`` adds nothing: SGLang's first branch that holds returns, so a reader taking
    the first entry whose tests hold reads the function as SGLang runs it)."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            value = _string(stmt.value)
            out.append({"value": value, "line": stmt.lineno, "tests": [ast.unparse(t) for t in tests]})
            return
        if isinstance(stmt, ast.If):
            _chain(stmt.body, [*tests, stmt.test], out)
            _chain(stmt.orelse, tests, out)


def _default_attention(trees: dict[str, ast.Module]) -> dict[str, Any] | None:
    """SGLang's automatic attention choice (:data:`_DEFAULT_ATTENTION`): where it is, and each
    ``return`` of it with the tests around it, in code order (a non-constant return has value
    ``None``)."""
    for file, tree in trees.items():
        for qualname, fn in _functions(tree):
            if qualname.split(".")[-1] in _DEFAULT_ATTENTION:
                out: list[dict[str, Any]] = []
                _chain(fn.body, [], out)
                params = [a.arg for a in fn.args.args if a.arg != "self"]
                return {
                    "file": file.removeprefix("sglang/srt/"),
                    "function": qualname,
                    "params": params,
                    "returns": out,
                }
    return None


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{sub.name}", sub


def _constants(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level names bound to a list, tuple or set of strings (architecture lists)."""
    out: dict[str, list[str]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and len(value.args) == 1:
            value = value.args[0] if value.func.id in ("frozenset", "set", "tuple", "list") else value
        if isinstance(target, ast.Name) and isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            items = [_string(e) for e in value.elts]
            if items and all(i is not None for i in items):
                out[target.id] = [i for i in items if i is not None]
    return out


#: where SGLang's automatic block-FP8 linear choice is, and its function
_DENSE_AUTO: Final = ("sglang/srt/layers/quantization/fp8_utils.py", "_dispatch_auto_backend")


def _dense_auto(tree: ast.Module | None) -> list[list[str]]:
    """``[function, test]`` of each branch of the block-FP8 ``auto`` choice, in order (the last
    branch's test is ``else``): what ``_dispatch_auto_backend`` returns, and when."""
    fn = next(
        (n for n in (tree.body if tree else []) if isinstance(n, ast.FunctionDef) and n.name == _DENSE_AUTO[1]),
        None,
    )
    out: list[list[str]] = []
    body: list[ast.stmt] = fn.body if fn else []
    while body:
        stmt = next((s for s in body if isinstance(s, (ast.If, ast.Return))), None)
        if isinstance(stmt, ast.Return):
            out.append([_returned(stmt), "else"])
            break
        if not isinstance(stmt, ast.If):
            break
        ret = next((s for s in stmt.body if isinstance(s, ast.Return)), None)
        if ret is not None:
            out.append([_returned(ret), ast.unparse(stmt.test)])
        body = stmt.orelse
    return out


def _returned(ret: ast.Return) -> str:
    value = ret.value
    if isinstance(value, ast.Call):
        value = value.func
    return ast.unparse(value) if value is not None else "None"


def scan_overrides(path: Path) -> dict[str, Any]:
    """``{"version", "moe_runner", "dense_block_fp8_auto", "attention_default", "attention"}``:
    every place the release in the wheel at *path* sets its MoE runner by itself (see the
    module's docstring), in file and line order, the branches of its automatic block-FP8 linear
    choice (:func:`_dense_auto`), its automatic attention choice (:func:`_default_attention`) and
    every place it sets an attention backend by itself (:data:`ATTENTION_FIELDS`, as the MoE
    runner's places are read)."""
    from ._scan import _version

    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        found: list[dict[str, Any]] = []
        attention: list[dict[str, Any]] = []
        trees: dict[str, ast.Module] = {}
        constants: dict[str, list[str]] = {}
        for file in sorted(names):
            read = any(file == p or (p.endswith("/") and file.startswith(p)) for p in _FILES)
            if file.endswith(".py") and (read or file in _CONSTANT_FILES or file == _DENSE_AUTO[0]):
                trees[file] = ast.parse(z.read(file).decode(), filename=file)
                for k, v in _constants(trees[file]).items():
                    constants.setdefault(k, v)
        for file, tree in trees.items():
            if not any(file.startswith(p) for p in _FILES):
                continue
            for qualname, fn in _functions(tree):
                found += _Walker(file.removeprefix("sglang/srt/"), qualname, fn, constants).run()
                attention += _Walker(file.removeprefix("sglang/srt/"), qualname, fn, constants, ATTENTION_FIELDS).run()
        return {
            "version": _version(names, z),
            "moe_runner": sorted(found, key=lambda e: (e["file"], e["line"])),
            "dense_block_fp8_auto": _dense_auto(trees.get(_DENSE_AUTO[0])),
            "attention_default": _default_attention(trees),
            "attention": sorted(attention, key=lambda e: (e["file"], e["line"])),
        }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernelpolicy.releases.sglang._overrides", description=__doc__)
    p.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    p.add_argument("--out", type=Path, default=OVERRIDES_FILE)
    args = p.parse_args(argv)
    releases: dict[str, Any] = {}
    for wheel in args.wheels:
        try:
            data = scan_overrides(wheel)
        except (OSError, zipfile.BadZipFile, ValueError, StopIteration, SyntaxError) as exc:
            print(f"kernelpolicy: error: {wheel}: not a readable sglang wheel: {exc}", file=sys.stderr)
            return 2
        releases[data.pop("version")] = data
    doc = {
        "generated_by": "python -m kernelpolicy.releases.sglang._overrides",
        "releases": dict(sorted(releases.items(), key=lambda kv: Version(kv[0]))),
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
