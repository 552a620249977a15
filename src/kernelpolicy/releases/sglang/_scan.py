"""Read an SGLang wheel and write what the adapter needs to know about that release.

``python -m kernelpolicy.releases.sglang._scan WHEEL... [--out FILE] [--published]`` parses the
wheel's ``.py`` files with :mod:`ast` (nothing is imported or extracted) and writes, per release:
the values each backend flag accepts and its default, the plugin entry-point group, how
resolution can be hooked, where each selection point the adapter patches is (module, qualified
name, line), the exact pins of the kernel packages (``Requires-Dist``) and what SGLang checks of
the GPU before it turns DeepGEMM on; and, in ``options.json``, every option string of its
launch parser with its argparse ``dest`` (a launch line's abbreviations are read against
these). ``--published`` also lists the releases the package index
has of SGLang and sgl-deep-gemm (``check`` warns on a bound naming none of them). The committed
output is ``releases.json`` beside this module (``kernelpolicy knowledge stale`` reads the pins);
``tests/sglang/test_releases.py`` re-runs the scan on the cached wheels and compares.

``--options`` writes ``options.json`` instead: every option string the newest wheel's launch
parser accepts (the ``ServerArgs`` fields' ``Arg`` names and aliases, and the flags
``add_cli_args`` adds by hand). SGLang's parser accepts an unambiguous prefix of any of them
(``--tp 8`` is ``--tp-size 8``); the launch-line reader resolves prefixes against this list.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any, Final

from packaging.version import Version

from .versions import OPTIONS_FILE, RELEASES_FILE

__all__ = [
    "OPTIONS_FILE",
    "PINNED",
    "PUBLISHED",
    "RELEASES_FILE",
    "SELECTION_POINTS",
    "main",
    "scan_options",
    "scan_wheel",
]


#: The choice lists of the backend flags: constant name -> flag.
_CHOICES: Final = {
    "FP8_GEMM_RUNNER_BACKEND_CHOICES": "--fp8-gemm-backend",
    "FP4_GEMM_RUNNER_BACKEND_CHOICES": "--fp4-gemm-backend",
    "MOE_RUNNER_BACKEND_CHOICES": "--moe-runner-backend",
    "ATTENTION_BACKEND_CHOICES": "--attention-backend",
}
_CHOICE_FILES: Final = ("sglang/srt/arg_groups/choices.py", "sglang/srt/server_args.py")

#: The selection points the adapter patches: role -> (module, qualified name).
SELECTION_POINTS: Final = {
    "dense_config": ("sglang.srt.layers.quantization.fp8_utils", "initialize_fp8_gemm_config"),
    "dense_dispatch": ("sglang.srt.layers.quantization.fp8_utils", "dispatch_w8a8_block_fp8_linear"),
    "fp4_config": ("sglang.srt.layers.quantization.fp4_utils", "initialize_fp4_gemm_config"),
    "moe_config": ("sglang.srt.layers.moe.utils", "initialize_moe_config"),
    "moe_runner": ("sglang.srt.layers.moe.moe_runner.runner", "MoeRunner.__init__"),
    "scheduler_gemm_config": ("sglang.srt.managers.scheduler", "Scheduler.init_moe_gemm_config"),
    "deep_gemm_switch": ("sglang.srt.layers.deep_gemm_wrapper.configurer", "_compute_enable_deep_gemm"),
    "dense_layer": ("sglang.srt.layers.quantization.fp8", "Fp8Config.get_quant_method"),
    "resolution_post_init": ("sglang.srt.server_args", "ServerArgs._handle_model_specific_adjustments"),
    # the DeepSeek-family gate's router tier (0.5.20+; before, the gate's forward decides inline)
    "router_tier": ("sglang.srt.models.deepseek_common.utils", "tiny_router_gemm_max_tokens"),
}
#: Resolution steps the adapter wraps, when the release lets plugins wrap them.
_HOOK_STEPS: Final = ("handle_model_specific_adjustments", "handle_moe_kernel_config")
#: The packages whose exact pins (``Requires-Dist: NAME==X``) the rules read, as PyPI normalises them.
PINNED: Final = (
    "torch",
    "flashinfer-python",
    "flashinfer-cubin",
    "nvidia-cutlass-dsl",
    "sgl-deep-gemm",
    "sglang-kernel",
    "humming-kernels",
)
#: The ``ServerArgs`` fields of the backend flags: field -> flag (their defaults are read).
_FLAG_FIELDS: Final = {
    "fp8_gemm_runner_backend": "--fp8-gemm-backend",
    "fp4_gemm_runner_backend": "--fp4-gemm-backend",
    "moe_runner_backend": "--moe-runner-backend",
}
#: Where ``ServerArgs`` declares its fields: the class body, or (0.5.20+) the field groups.
_FIELD_FILES: Final = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/fields/")
_DG_SWITCH: Final = "sglang/srt/layers/deep_gemm_wrapper/configurer.py"
_ENV_NAMES: Final = (
    "SGLANG_ENABLE_JIT_DEEPGEMM",
    "SGLANG_JIT_DEEPGEMM_PRECOMPILE",
    "SGLANG_PLUGINS",
    "USE_TRITON_W8A8_FP8_KERNEL",
    "SGLANG_FORCE_FP8_MARLIN",
)


def _module_file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _defs(tree: ast.Module) -> dict[str, ast.AST]:
    """Qualified name -> node, for module-level functions, classes and their methods."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            out[node.name] = node
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{sub.name}"] = sub
    return out


def _string_list(tree: ast.Module, name: str) -> list[str] | None:
    for node in tree.body:
        named = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        if named and isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def _string_set(tree: ast.Module, name: str) -> list[str]:
    """The string constants assigned to *name* (a set, frozenset(...) or list literal)."""
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets = [node.target] if isinstance(node, ast.AnnAssign) else targets
        value = getattr(node, "value", None) if any(isinstance(t, ast.Name) and t.id == name for t in targets) else None
        if isinstance(value, ast.AST):
            strings = {c.value for c in ast.walk(value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            return sorted(strings)
    return []


def _requires(names: list[str], z: zipfile.ZipFile) -> dict[str, str]:
    """The exact pins of :data:`PINNED` in the wheel's ``Requires-Dist`` (extras' lines left out)."""
    meta = next(n for n in names if re.fullmatch(r"sglang-[^/]+\.dist-info/METADATA", n))
    pins: dict[str, str] = {}
    for line in z.read(meta).decode().splitlines():
        m = re.fullmatch(r"Requires-Dist: ([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*==\s*([^;\s]+)\s*(;.*)?", line)
        if m is None or "extra ==" in (m.group(3) or ""):
            continue
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        if name in PINNED:
            pins[name] = m.group(2)
    return dict(sorted(pins.items()))


def _defaults(trees: list[ast.Module]) -> dict[str, str]:
    """Flag -> the default of its ``ServerArgs`` field (a string constant)."""
    out: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            flag = _FLAG_FIELDS.get(node.target.id)
            if flag and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                out.setdefault(flag, node.value.value)
    return dict(sorted(out.items()))


def _deep_gemm_switch(tree: ast.Module | None) -> dict[str, Any] | None:
    """What ``_compute_enable_deep_gemm`` says about the GPU before it imports DeepGEMM: the
    lowest CUDA capability (``sm_version < N``), the capabilities it turns off outright
    (``if sm_version == N: return False``) and those it probes for a DeepGEMM entry point."""
    fn = _defs(tree).get("_compute_enable_deep_gemm") if tree is not None else None
    if not isinstance(fn, ast.FunctionDef):
        return None
    low: int | None = None
    off: list[int] = []
    probed: dict[str, list[str]] = {}
    for node in fn.body:
        if not isinstance(node, ast.If):
            continue
        cuda_tests = [
            v
            for b in ast.walk(node.test)
            if isinstance(b, ast.BoolOp) and any(isinstance(x, ast.Name) and x.id == "_is_cuda" for x in b.values)
            for v in b.values
        ]
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            left, (op,), (right,) = cmp.left, cmp.ops, cmp.comparators
            if not (isinstance(left, ast.Name) and left.id == "sm_version"):
                continue
            if isinstance(op, ast.Lt) and isinstance(right, ast.Constant) and isinstance(right.value, int):
                if cmp in cuda_tests:  # ``_is_cuda and sm_version < N`` (not MUSA's own floor)
                    low = int(right.value)
                continue
            elts = right.elts if isinstance(op, ast.In) and isinstance(right, ast.Tuple) else [right]
            sms = [int(e.value) for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, int)]
            if not isinstance(op, ast.Eq | ast.In) or not sms:
                continue
            # a probe: an import under the test, or a call in it (``and not _apis_available()``)
            names = {a.name for b in ast.walk(node) if isinstance(b, ast.ImportFrom) for a in b.names}
            calls = (c for c in ast.walk(node.test) if isinstance(c, ast.Call))
            names |= {c.func.id for c in calls if isinstance(c.func, ast.Name)}
            if names:
                probed.update({str(sm): sorted(names) for sm in sms})
            else:
                off += sms
    return {"min_sm": low, "off_sm": off, "probed_sm": probed}


def _negated(names: list[str], keywords: list[ast.keyword]) -> list[str]:
    """*names* and, for ``action=argparse.BooleanOptionalAction``, the ``--no-`` spelling argparse
    adds for each long one."""
    action = next((kw.value for kw in keywords if kw.arg == "action"), None)
    name = action.attr if isinstance(action, ast.Attribute) else action.id if isinstance(action, ast.Name) else ""
    if name != "BooleanOptionalAction":
        return names
    return names + ["--no-" + n[2:] for n in names if n.startswith("--")]


def _argparse_dest(names: list[str], keywords: list[ast.keyword]) -> str:
    """The ``dest`` argparse gives an option of *names*: ``dest=`` when given, else the first long
    name (``--tp-size`` -> ``tp_size``), else the first short one."""
    for kw in keywords:
        if kw.arg == "dest" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    first = next((n for n in names if n.startswith("--")), names[0])
    return first.lstrip("-").replace("-", "_")


def _call_options(call: ast.Call) -> dict[str, str]:
    """The option strings an ``add_argument("--a", "--b", ...)`` call declares -> their ``dest``."""
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    names = [n for n in names if n[:1] == "-"]
    if not names:
        return {}
    dest = _argparse_dest(names, call.keywords)
    return dict.fromkeys(_negated(names, call.keywords), dest)


def _field_meta(node: ast.AnnAssign) -> ast.expr | None:
    """The metadata of an ``A[T, META]`` (``Annotated``) field: its help text or ``Arg(...)``."""
    ann = node.annotation
    if not (isinstance(node.target, ast.Name) and isinstance(ann, ast.Subscript)):
        return None
    if not (isinstance(ann.value, ast.Name) and ann.value.id in ("A", "Annotated")):
        return None
    parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else []
    return parts[1] if len(parts) >= 2 else None


def _field_options(node: ast.AnnAssign) -> dict[str, str]:
    """The option strings of one ``A[T, "help"]`` / ``A[T, Arg(...)]`` field -> the field (SGLang's
    ``add_cli_args_from_dataclass`` gives every spelling the field's name as ``dest``):
    ``--field-name`` (or ``Arg(cli_name=...)``) and ``Arg(aliases=[...])``; none for
    ``Arg(no_cli=True)`` or a field of another annotation (SGLang skips those)."""
    meta = _field_meta(node)
    if meta is None or not isinstance(node.target, ast.Name):
        return {}
    field = node.target.id
    name = "--" + field.replace("_", "-")
    if isinstance(meta, ast.Constant | ast.JoinedStr | ast.BinOp):  # the help text alone
        return {name: field}
    if not (isinstance(meta, ast.Call) and isinstance(meta.func, ast.Name) and meta.func.id == "Arg"):
        return {}
    aliases: list[str] = []
    for kw in meta.keywords:
        if kw.arg == "no_cli" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            return {}
        if kw.arg == "cli_name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            name = kw.value.value
        if kw.arg == "aliases" and isinstance(kw.value, ast.List | ast.Tuple):
            aliases += [e.value for e in kw.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return dict.fromkeys(_negated([name, *aliases], meta.keywords), field)


def _options(server_args: ast.Module | None, field_trees: list[ast.Module]) -> dict[str, str]:
    """Every option string of SGLang's launch parser (``prepare_server_args``) -> its ``dest``
    (the ``ServerArgs`` field it sets): the ``parser.add_argument`` calls of ``server_args.py``
    and the CLI fields of ``ServerArgs`` (its own class body, or, 0.5.20+, the field groups of
    ``arg_groups/fields/``). A launch line's abbreviations are read against these, as argparse
    reads them."""
    out = {"-h": "help", "--help": "help"}  # argparse's own
    if server_args is not None:
        for node in ast.walk(server_args):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                out.update(_call_options(node))
    classes = [
        c
        for t in field_trees
        for c in t.body
        if isinstance(c, ast.ClassDef) and (t is not server_args or c.name == "ServerArgs")
    ]
    for cls in classes:
        for node in cls.body:
            if isinstance(node, ast.AnnAssign):
                out.update(_field_options(node))
    return dict(sorted(out.items()))


def _version(names: list[str], z: zipfile.ZipFile) -> str:
    meta = next(n for n in names if re.fullmatch(r"sglang-[^/]+\.dist-info/METADATA", n))
    for line in z.read(meta).decode().splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    raise ValueError(f"{meta}: no `Version:` line")


def scan_wheel(path: Path) -> dict[str, Any]:
    """What the adapter needs to know about the SGLang release in the wheel at *path*."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        have = set(names)
        trees: dict[str, ast.Module] = {}

        def tree(file: str) -> ast.Module | None:
            if file not in have:
                return None
            if file not in trees:
                trees[file] = ast.parse(z.read(file).decode(), filename=file)
            return trees[file]

        flags: dict[str, list[str]] = {}
        for const, flag in _CHOICES.items():
            for file in _CHOICE_FILES:
                t = tree(file)
                values = _string_list(t, const) if t is not None else None
                if values is not None:
                    flags[flag] = values
                    break
        points: dict[str, dict[str, Any]] = {}
        for role, (module, qualname) in SELECTION_POINTS.items():
            t = tree(_module_file(module))
            node = _defs(t).get(qualname) if t is not None else None
            if node is None:
                continue
            is_def = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            params = [a.arg for a in node.args.args] if is_def else []  # type: ignore[attr-defined]
            points[role] = {"module": module, "name": qualname, "line": getattr(node, "lineno", 0), "params": params}
        plugins = tree("sglang/srt/plugins/__init__.py")
        group = None
        if plugins is not None:
            for node in plugins.body:
                if (
                    isinstance(node, ast.Assign)
                    and isinstance(node.value, ast.Constant)
                    and any(isinstance(t, ast.Name) and t.id == "GENERAL_PLUGINS_GROUP" for t in node.targets)
                ):
                    group = str(node.value.value)
        hooks_tree = tree("sglang/srt/arg_groups/resolution_hooks.py")
        hookable = [s for s in _HOOK_STEPS if s in _string_set(hooks_tree, "_OVERRIDABLE_HOOKS")] if hooks_tree else []
        environ = tree("sglang/srt/environ.py")
        env_defined = set()
        if environ is not None:
            env_defined = {n.id for n in ast.walk(environ) if isinstance(n, ast.Name)} | {
                t.id
                for n in ast.walk(environ)
                if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)
            }
        field_trees = [
            t
            for f in names
            if f.endswith(".py") and any(f == p or (p.endswith("/") and f.startswith(p)) for p in _FIELD_FILES)
            for t in (tree(f),)
            if t is not None
        ]
        return {
            "version": _version(names, z),
            "requires": _requires(names, z),
            "defaults": _defaults(field_trees),
            "deep_gemm_switch": _deep_gemm_switch(tree(_DG_SWITCH)),
            "flags": flags,
            "plugin_group": group,
            "resolution": "hooks" if hookable else "post_init",
            "hookable_steps": hookable,
            "selection_points": points,
            "env": sorted(e for e in _ENV_NAMES if e in env_defined),
        }


def scan_options(path: Path) -> dict[str, str]:
    """Every option string of the launch parser of the SGLang release in the wheel at *path* ->
    its argparse ``dest`` (:func:`_options`)."""
    with zipfile.ZipFile(path) as z:
        have = set(z.namelist())
        trees = {
            f: ast.parse(z.read(f).decode(), filename=f)
            for f in sorted(have)
            if f.endswith(".py") and any(f == p or (p.endswith("/") and f.startswith(p)) for p in _FIELD_FILES)
        }
    return _options(trees.get("sglang/srt/server_args.py"), list(trees.values()))


#: the packages whose published releases the SGLang data file lists (bounds on them are checked)
PUBLISHED: Final = ("sglang", "sgl-deep-gemm")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernelpolicy.releases.sglang._scan", description=__doc__)
    p.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    p.add_argument("--out", type=Path, default=RELEASES_FILE)
    p.add_argument(
        "--published",
        action="store_true",
        help=f"also list the releases the package index has of {', '.join(PUBLISHED)} (`check` reads them)",
    )
    p.add_argument(
        "--options",
        action="store_true",
        help="write the newest wheel's launch option strings to options.json (or --out) instead",
    )
    args = p.parse_args(argv)
    if args.options:
        return _write_options(args.wheels, args.out if args.out != RELEASES_FILE else OPTIONS_FILE)
    published: dict[str, list[str]] = {}
    if args.published:
        from ..vllm._scan import ScanError, index_versions

        try:
            published = {name: index_versions(name) for name in PUBLISHED}
        except ScanError as exc:
            print(f"kernelpolicy: error: {exc}", file=sys.stderr)
            return 2
    elif args.out.is_file():
        published = json.loads(args.out.read_text()).get("published", {})
    releases: dict[str, Any] = {}
    options: dict[str, dict[str, str]] = {}
    for wheel in args.wheels:
        try:
            data = scan_wheel(wheel)
            options[data["version"]] = scan_options(wheel)
        except (OSError, zipfile.BadZipFile, ValueError, StopIteration, SyntaxError) as exc:
            print(f"kernelpolicy: error: {wheel}: not a readable sglang wheel: {exc}", file=sys.stderr)
            return 2
        releases[data["version"]] = data
    doc: dict[str, Any] = {
        "generated_by": "python -m kernelpolicy.releases.sglang._scan",
        "releases": dict(sorted(releases.items(), key=lambda kv: Version(kv[0]))),
    }
    if published:
        doc["published"] = dict(sorted(published.items()))
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    # the launch parsers' options, apart: only an SGLang launch line reads them
    by_version = dict(sorted(options.items(), key=lambda kv: Version(kv[0])))
    opts = {"generated_by": doc["generated_by"], "releases": by_version}
    args.out.with_name(OPTIONS_FILE.name).write_text(json.dumps(opts, indent=1) + "\n")
    return 0


def _write_options(wheels: list[Path], out: Path) -> int:
    scanned = []
    for wheel in wheels:
        try:
            scanned.append(scan_options(wheel))
        except (OSError, zipfile.BadZipFile, ValueError, StopIteration, SyntaxError) as exc:
            print(f"kernelpolicy: error: {wheel}: not a readable sglang wheel: {exc}", file=sys.stderr)
            return 2
    newest = max(scanned, key=lambda d: Version(d["version"]))
    doc = {"generated_by": "python -m kernelpolicy.releases.sglang._scan --options", **newest}
    out.write_text(json.dumps(doc, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
