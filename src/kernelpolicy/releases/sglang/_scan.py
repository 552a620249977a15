"""Read an SGLang wheel and write what the adapter needs to know about that release.

``python -m kernelpolicy.adapters.sglang._scan WHEEL... [--out FILE]`` parses the wheel's
``.py`` files with :mod:`ast` (nothing is imported or extracted) and writes, per release: the
values each backend flag accepts, the plugin entry-point group, how resolution can be hooked,
and where each selection point the adapter patches is (module, qualified name, line). The
committed output is ``releases.json`` beside this module; ``tests/sglang/test_releases.py``
re-runs the scan on the cached wheels and compares.
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

from .versions import RELEASES_FILE

__all__ = ["RELEASES_FILE", "SELECTION_POINTS", "main", "scan_wheel"]


#: The choice lists of the backend flags: constant name -> flag.
_CHOICES: Final = {
    "FP8_GEMM_RUNNER_BACKEND_CHOICES": "--fp8-gemm-backend",
    "FP4_GEMM_RUNNER_BACKEND_CHOICES": "--fp4-gemm-backend",
    "MOE_RUNNER_BACKEND_CHOICES": "--moe-runner-backend",
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
        return {
            "version": _version(names, z),
            "flags": flags,
            "plugin_group": group,
            "resolution": "hooks" if hookable else "post_init",
            "hookable_steps": hookable,
            "selection_points": points,
            "env": sorted(e for e in _ENV_NAMES if e in env_defined),
        }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernelpolicy.adapters.sglang._scan", description=__doc__)
    p.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    p.add_argument("--out", type=Path, default=RELEASES_FILE)
    args = p.parse_args(argv)
    releases: dict[str, Any] = {}
    for wheel in args.wheels:
        try:
            data = scan_wheel(wheel)
        except (OSError, zipfile.BadZipFile, ValueError, StopIteration, SyntaxError) as exc:
            print(f"kernelpolicy: error: {wheel}: not a readable sglang wheel: {exc}", file=sys.stderr)
            return 2
        releases[data["version"]] = data
    doc = {"generated_by": "python -m kernelpolicy.adapters.sglang._scan", "releases": dict(sorted(releases.items()))}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
