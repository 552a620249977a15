"""vLLM's attention-backend priority per release, read from its wheel (issue #39).

``python -m kernelpolicy.releases.vllm._scan_attention [--write] WHEEL_OR_SITE_PACKAGES ...``
reads ``_get_backend_priorities`` of ``vllm/platforms/cuda.py`` in each release, evaluates it
for every case the attention path's facts tell apart (MLA or not, the GPU family, a quantized KV
cache or not) and writes:

- ``attention.json`` beside this module: each release's orders in vLLM's own names;
- ``rules/backends/attention.vllm.yaml``: the ``order`` entries of the attention path, in
  kernelpolicy's ids, each naming its engine (``deploy.engine: vllm``) and its window of
  releases (consecutive scanned releases with equal orders share one window), then the newest
  release's orders for a deployment whose vLLM release is unknown.

The function is read with ``ast`` and interpreted here (a few statements and expressions: ``if``,
lists, comparisons, ``list.insert``/``append``); nothing of vLLM runs. A construct the interpreter
does not know stops the scan with its line, so a release that rewrites the selector is noticed,
never read wrongly. vLLM names that no kernelpolicy id stands for (TokenSpeed MLA, TurboQuant,
the FA4 sparse MLA kernel, the multimodal-prefix kernels) are left out of the orders and listed in
the JSON. The per-rank head count (``num_heads``) that orders the sparse MLA kernels on SM100 is
not a fact: the orders are those of an unknown head count (vLLM's ``None``).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CASES",
    "ID_OF",
    "JSON_FILE",
    "YAML_FILE",
    "ScanError",
    "main",
    "orders_yaml",
    "scan_release",
]

JSON_FILE: Final = Path(__file__).with_name("attention.json")
YAML_FILE: Final = Path(__file__).parents[4] / "rules" / "backends" / "attention.vllm.yaml"
_SELECTOR: Final = "vllm/platforms/cuda.py"
_FUNCTION: Final = "_get_backend_priorities"

#: vLLM's AttentionBackendEnum names -> kernelpolicy's attention ids (``None``: no id stands for it).
ID_OF: Final[Mapping[str, str | None]] = {
    "FLASH_ATTN": "flash_attn",
    "FLASH_ATTN_MLA": "flash_attn",
    "FLASHINFER": "flashinfer",
    "FLASHINFER_MLA": "flashinfer",
    "TRITON_ATTN": "triton_attn",
    "TRITON_MLA": "triton_attn",
    "FLEX_ATTENTION": "flex_attention",
    "FLASHMLA": "flashmla",
    "CUTLASS_MLA": "cutlass_mla",
    "FLASHMLA_SPARSE": "flashmla_sparse",
    "FLASHINFER_MLA_SPARSE": "flashinfer_mla_sparse",
    "FLASHINFER_MLA_SPARSE_SM90": "flashinfer_mla_sparse",
    "FLASHINFER_MLA_SPARSE_SM120": "flashinfer_mla_sparse",
    "TOKENSPEED_MLA": None,
    "TURBOQUANT": None,
    "FLASH_ATTN_MLA_SPARSE": None,
    "FLASH_ATTN_MLA_SPARSE_FA4": None,
    "TRITON_FLASHINFER": None,
    "TRITON_FLASH_ATTN": None,
}
#: ``gpu.family`` -> the capability major vLLM compares.
_MAJORS: Final = {"sm80": 8, "sm90": 9, "sm100": 10, "sm110": 11, "sm120": 12}
#: The cases the attention facts tell apart: (MLA, family, quantized KV cache).
CASES: Final = tuple((mla, fam, kvq) for mla in (False, True) for fam in _MAJORS for kvq in (False, True))
_QUANTIZED: Final = ("fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4")
_UNQUANTIZED: Final = ("auto", "bfloat16", "float16")


class ScanError(Exception):
    """The selector could not be read (its file, function or a construct the interpreter lacks)."""


class _Cap:
    def __init__(self, major: int) -> None:
        self.major = major
        self.minor = 0


class _Interp:
    """Interprets the selector's body for one case."""

    def __init__(self, env: dict[str, Any], file: str) -> None:
        self.env = env
        self.file = file

    def fail(self, node: ast.AST, what: str) -> ScanError:
        return ScanError(f"{self.file}:{getattr(node, 'lineno', '?')}: {what} (`{ast.unparse(node)[:80]}`)")

    def run(self, body: Sequence[ast.stmt]) -> list[str] | None:
        for st in body:
            if isinstance(st, (ast.ImportFrom, ast.Import)) or (
                isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
            ):
                continue
            if isinstance(st, ast.Return):
                value = self.expr(st.value) if st.value is not None else None
                if not isinstance(value, list):
                    raise self.fail(st, "the selector returns no list")
                return value
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                self.env[st.targets[0].id] = self.expr(st.value)
            elif isinstance(st, ast.If):
                out = self.run(st.body if self.expr(st.test) else st.orelse)
                if out is not None:
                    return out
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                self.call(st.value)
            else:
                raise self.fail(st, "a statement the attention scan does not read")
        return None

    def call(self, node: ast.Call) -> Any:
        f = node.func
        args = [self.expr(a) for a in node.args]
        if isinstance(f, ast.Name) and f.id == "is_quantized_kv_cache" and len(args) == 1:
            return args[0] in _QUANTIZED
        if isinstance(f, ast.Attribute) and f.attr in ("insert", "append") and not node.keywords:
            target = self.expr(f.value)
            if isinstance(target, list):
                getattr(target, f.attr)(*args)
                return None
        raise self.fail(node, "a call the attention scan does not read")

    def expr(self, node: ast.expr) -> Any:  # noqa: PLR0911, PLR0912 (one case per construct)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise self.fail(node, "a name the attention scan does not know")
            return self.env[node.id]
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "AttentionBackendEnum":
                return node.attr
            owner = self.expr(node.value)
            if isinstance(owner, _Cap) and node.attr in ("major", "minor"):
                return getattr(owner, node.attr)
            raise self.fail(node, "an attribute the attention scan does not read")
        if isinstance(node, ast.List):
            out: list[Any] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    out += self.expr(e.value)
                else:
                    out.append(self.expr(e))
            return out
        if isinstance(node, ast.IfExp):
            return self.expr(node.body) if self.expr(node.test) else self.expr(node.orelse)
        if isinstance(node, ast.BoolOp):
            values = node.values
            if isinstance(node.op, ast.And):
                return all(self.expr(v) for v in values)
            return any(self.expr(v) for v in values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.expr(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = self.expr(node.left), self.expr(node.comparators[0])
            return _compare(node.ops[0], a, b, lambda: self.fail(node, "a comparison the scan does not read"))
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(node, "an expression the attention scan does not read")


def _compare(op: ast.cmpop, a: Any, b: Any, fail: Any) -> bool:
    """One comparison as Python makes it (``None`` against a number: false, as vLLM guards it)."""
    tests: dict[type[ast.cmpop], Any] = {
        ast.Is: lambda: a is b,
        ast.IsNot: lambda: a is not b,
        ast.In: lambda: a in b,
        ast.NotIn: lambda: a not in b,
        ast.Eq: lambda: a == b,
        ast.NotEq: lambda: a != b,
        ast.Lt: lambda: a is not None and b is not None and a < b,
        ast.LtE: lambda: a is not None and b is not None and a <= b,
        ast.Gt: lambda: a is not None and b is not None and a > b,
        ast.GtE: lambda: a is not None and b is not None and a >= b,
    }
    test = tests.get(type(op))
    if test is None:
        raise fail()
    return bool(test())


def _selector(root: Path) -> tuple[ast.FunctionDef, str]:
    """The selector function of the release under *root* (a wheel folder or site-packages)."""
    file = root / _SELECTOR
    if not file.is_file():
        raise ScanError(f"{file}: no vLLM selector here (give a folder holding `vllm/`)")
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == _FUNCTION:
            return node, str(file)
    raise ScanError(f"{file}: no `{_FUNCTION}` (the release selects attention otherwise)")


def _version(root: Path) -> str:
    for meta in sorted(root.glob("vllm-*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8").splitlines():
            if line.startswith("Version: "):
                return line.split(": ", 1)[1].split("+", 1)[0].strip()
    raise ScanError(f"{root}: no vllm-*.dist-info with a version")


def scan_release(root: Path) -> dict[str, Any]:
    """One release's orders: ``{"version", "orders": {"mla|family|kvq": [vLLM names]}}``."""
    fn, file = _selector(root)
    params = {a.arg for a in fn.args.args}
    orders: dict[str, list[str]] = {}
    for mla, fam, kvq in CASES:
        env: dict[str, Any] = {
            "use_mla": mla,
            "device_capability": _Cap(_MAJORS[fam]),
            "num_heads": None,
            "kv_cache_dtype": "fp8" if kvq else "auto",
            "use_non_causal": False,
            "head_size": 576 if mla else None,
            "use_mm_prefix": False,
        }
        env = {k: v for k, v in env.items() if k in params}
        missing = params - set(env)
        if missing:
            raise ScanError(f"{file}:{fn.lineno}: `{_FUNCTION}` takes {sorted(missing)}, which the scan does not set")
        names = _Interp(env, file).run(fn.body)
        if names is None:
            raise ScanError(f"{file}:{fn.lineno}: `{_FUNCTION}` returns nothing for {(mla, fam, kvq)}")
        orders[_case_key(mla, fam, kvq)] = names
    unknown = sorted({n for names in orders.values() for n in names} - set(ID_OF))
    if unknown:
        raise ScanError(
            f"{file}: vLLM names no kernelpolicy id is mapped for: {', '.join(unknown)} (add them to ID_OF)"
        )
    return {"version": _version(root), "orders": orders}


def _case_key(mla: bool, fam: str, kvq: bool) -> str:
    return f"{'mla' if mla else 'mha'}|{fam}|{'fp8' if kvq else 'bf16'}"


def _ids(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(i for i in (ID_OF[n] for n in names) if i is not None))


def _series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _entries(orders: Mapping[str, list[str]], version_when: str | None, tag: str, releases: Sequence[str]) -> list[str]:
    """The ``order`` entries of one window: per MLA kind, the families with one order (and the
    KV-cache split only where it orders differently), in YAML."""
    out: list[str] = []
    for mla in (False, True):
        kind = "mla" if mla else "mha"
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
        for fam in _MAJORS:
            plain = tuple(_ids(orders[_case_key(mla, fam, False)]))
            fp8 = tuple(_ids(orders[_case_key(mla, fam, True)]))
            groups.setdefault((plain, fp8), []).append(fam)
        for (plain, fp8), fams in groups.items():
            split = plain != fp8
            for kvq, ids in ((True, fp8), (False, plain)) if split else ((None, plain),):
                when = ["deploy.engine: vllm"]
                if version_when is not None:
                    when.append(f'vllm.version: "{version_when}"')
                when.append(f"model.mla: {'true' if mla else 'false'}")
                when.append("gpu.family: " + (fams[0] if len(fams) == 1 else "[" + ", ".join(fams) + "]"))
                if kvq:  # the unquantized order follows it with no KV condition: vLLM's default `auto`
                    when.append("deploy.kv_cache_dtype: [" + ", ".join(_QUANTIZED) + "]")
                fam_tag = "-".join(fams) if len(fams) < len(_MAJORS) else "any"
                kv_tag = "" if kvq is None else ("-fp8-kv" if kvq else "-bf16-kv")
                out += [
                    f"  - id: vllm-attention-{tag}-{kind}-{fam_tag}{kv_tag}",
                    "    path: attention",
                    "    when: {" + ", ".join(when) + "}",
                    "    backends: [" + ", ".join(ids) + "]",
                    f"    because: vLLM {' to '.join(dict.fromkeys((releases[0], releases[-1])))}'s CUDA attention"
                    f" priority ({kind.upper()}"
                    + (", " + ("quantized" if kvq else "BF16/FP16") + " KV cache" if kvq is not None else "")
                    + ")",
                    "    refs: [" + ", ".join(f"vllm@v{r}:{_SELECTOR}" for r in releases) + "]",
                ]
    return out


def orders_yaml(releases: Sequence[Mapping[str, Any]]) -> str:
    """``rules/backends/attention.vllm.yaml`` from the scanned *releases* (any order)."""
    from packaging.version import Version

    rels = sorted(releases, key=lambda r: Version(r["version"]))
    windows: list[tuple[list[str], Mapping[str, list[str]]]] = []
    for r in rels:
        same = windows and {k: _ids(v) for k, v in windows[-1][1].items()} == {
            k: _ids(v) for k, v in r["orders"].items()
        }
        if same:
            windows[-1][0].append(r["version"])
        else:
            windows.append(([r["version"]], r["orders"]))
    lines = [
        "# Generated by `python -m kernelpolicy.releases.vllm._scan_attention --write` from the scanned",
        "# wheels (src/kernelpolicy/releases/vllm/attention.json). Do not edit.",
        "# vLLM's attention order per release window (" + ", ".join(r["version"] for r in rels) + " scanned;",
        "# a release between two scanned ones is read as the older one), then the newest release's",
        "# order for a deployment whose vLLM release is unknown. vLLM skips a backend whose class",
        "# rejects the deployment: the catalog's requirements (attention.yaml) do that here.",
        "order:",
    ]
    for i, (versions, orders) in enumerate(windows):
        low = _series(versions[0])
        high = _series(windows[i + 1][0][0]) if i + 1 < len(windows) else None
        when = f">={low}" + (f",<{high}" if high else "")
        lines += _entries(orders, when, low.replace(".", "_"), versions)
    lines += _entries(windows[-1][1], None, "default", windows[-1][0][-1:])
    from ...tools.fmt import format_text  # as every generated rule file: in `kernelpolicy fmt`'s layout

    return format_text("\n".join(lines) + "\n", file=YAML_FILE, schema="../../schemas/rules.schema.json")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelpolicy.releases.vllm._scan_attention")
    ap.add_argument("roots", nargs="+", type=Path, help="a site-packages (or unzipped wheel) folder per release")
    ap.add_argument("--write", action="store_true", help="write attention.json and rules/backends/attention.vllm.yaml")
    args = ap.parse_args(argv)
    from packaging.version import Version

    try:
        releases = [scan_release(r) for r in args.roots]
    except ScanError as exc:
        print(f"kernelpolicy: {exc}", file=sys.stderr)
        return 2
    data = {
        "schema": "kernelpolicy.vllm-attention/1",
        "unmapped": sorted(n for n, i in ID_OF.items() if i is None),
        "releases": sorted(releases, key=lambda r: Version(r["version"])),
    }
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.write:
        JSON_FILE.write_text(text, encoding="utf-8")
        YAML_FILE.write_text(orders_yaml(releases), encoding="utf-8")
    else:
        sys.stdout.write(orders_yaml(releases))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
