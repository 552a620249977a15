#!/usr/bin/env python3
"""Scan a vLLM source tree for the FP8 kernel selection points kernelpolicy patches.

    scripts/vllm-selection-scan.py ROOT [ROOT ...]

ROOT is a folder that contains the ``vllm/`` package (a venv's site-packages, or the ``.py``
files unzipped from a wheel). Prints one JSON object per root, keyed by the version found in
its dist-info (or the folder name). The output is what
``src/kernelpolicy/adapters/vllm/_versions.py`` is checked against; it reads files with
``ast`` and never imports vLLM.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

DENSE = "vllm/model_executor/kernels/linear/__init__.py"
DG_KERNEL = "vllm/model_executor/kernels/linear/scaled_mm/deep_gemm.py"
ORACLE_DIR = "vllm/model_executor/layers/fused_moe/oracle"
ORACLE = f"{ORACLE_DIR}/fp8.py"
WARMUP = "vllm/model_executor/warmup/deep_gemm_warmup.py"
KWARMUP = "vllm/model_executor/warmup/kernel_warmup.py"
GATE = "vllm/model_executor/layers/fused_moe/router/gate_linear.py"
DG_UTILS = "vllm/utils/deep_gemm.py"
CUSTOM_OP = "vllm/model_executor/custom_op.py"


def _tree(root: Path, rel: str) -> ast.Module | None:
    path = root / rel
    if not path.is_file():
        return None
    return ast.parse(path.read_text(encoding="utf-8"))


def _module_name(rel: str) -> str:
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _top_functions(tree: ast.Module | None) -> list[str]:
    if tree is None:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]


def _func(tree: ast.Module | None, name: str) -> ast.FunctionDef | None:
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _params(fn: ast.FunctionDef | None) -> list[str]:
    if fn is None:
        return []
    a = fn.args
    out = [p.arg for p in a.posonlyargs + a.args]
    out += [f"*{p.arg}" for p in a.kwonlyargs]
    return out


def _cuda_list(tree: ast.Module | None, name: str) -> list[str]:
    """Class names in ``NAME[PlatformEnum.CUDA]`` of a module-level dict literal."""
    if tree is None:
        return []
    for node in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if not (isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Dict)):
            continue
        for key, val in zip(value.keys, value.values):
            if isinstance(key, ast.Attribute) and key.attr == "CUDA" and isinstance(val, ast.List):
                return [e.id for e in val.elts if isinstance(e, ast.Name)]
    return []


def _importers(root: Path, module: str, name: str) -> list[str]:
    """Modules under vllm/ that do ``from MODULE import ... NAME ...`` at any level."""
    found: list[str] = []
    pat = re.compile(rf"from\s+{re.escape(module)}\s+import\s*\(?[^)]*?\b{name}\b", re.S)
    for path in sorted((root / "vllm").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if name in text and pat.search(text):
            found.append(_module_name(str(path.relative_to(root))))
    return found


def _enum_members(tree: ast.Module | None, cls: str) -> list[str]:
    if tree is None:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [t.id for s in node.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)]
    return []


def _class_attr_literal(tree: ast.Module | None, cls: str, attr: str) -> Any:
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for s in node.body:
                tgt = (
                    s.target if isinstance(s, ast.AnnAssign) else (s.targets[0] if isinstance(s, ast.Assign) else None)
                )
                if isinstance(tgt, ast.Name) and tgt.id == attr and s.value is not None:
                    try:
                        val = ast.literal_eval(s.value)
                    except ValueError:
                        return ast.unparse(s.value)
                    if isinstance(val, (set, frozenset)):
                        return sorted(val)
                    return val
    return None


def _self_attrs(fn: ast.FunctionDef | None, prefix: str) -> list[str]:
    if fn is None:
        return []
    names: set[str] = set()
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr.startswith(prefix)
            and isinstance(node.ctx, ast.Store)
        ):
            names.add(node.attr)
    return sorted(names)


def _module_global_kind(tree: ast.Module | None, name: str) -> str | None:
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id == name:
                return type(node.value).__name__ if node.value is not None else None
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    return type(node.value).__name__
    return None


def _version(root: Path) -> str:
    for meta in root.glob("vllm-*.dist-info/METADATA"):
        for line in meta.read_text(encoding="utf-8").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return root.name


def scan(root: Path) -> dict[str, Any]:
    dense = _tree(root, DENSE)
    oracle = _tree(root, ORACLE)
    warm = _tree(root, WARMUP)
    kwarm = _tree(root, KWARMUP)
    gate = _tree(root, GATE)
    dgu = _tree(root, DG_UTILS)
    oracle_src = {p.name: p.read_text(encoding="utf-8") for p in sorted((root / ORACLE_DIR).glob("*.py"))}
    gate_init = None
    if gate is not None:
        for node in ast.walk(gate):
            if isinstance(node, ast.ClassDef) and node.name == "GateLinear":
                gate_init = next(
                    (s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"),
                    None,
                )
    gate_src = (root / GATE).read_text(encoding="utf-8") if gate is not None else ""
    custom_op = (root / CUSTOM_OP).read_text(encoding="utf-8") if (root / CUSTOM_OP).is_file() else ""
    dg_vendored = root / "vllm/third_party/deep_gemm"
    return {
        "version": _version(root),
        "dense": {
            "module_exists": dense is not None,
            "block_kernels_cuda": _cuda_list(dense, "_POSSIBLE_FP8_BLOCK_KERNELS"),
            "fp8_kernels_cuda": _cuda_list(dense, "_POSSIBLE_FP8_KERNELS"),
            "choose_params": _params(_func(dense, "choose_scaled_mm_linear_kernel")),
            "init_fp8_params": _params(_func(dense, "init_fp8_linear_kernel")),
            "init_fp8_importers": _importers(root, "vllm.model_executor.kernels.linear", "init_fp8_linear_kernel"),
            "deep_gemm_kernel_file": (root / DG_KERNEL).is_file(),
        },
        "moe": {
            "select_params": _params(_func(oracle, "select_fp8_moe_backend")),
            "importers": _importers(root, "vllm.model_executor.layers.fused_moe.oracle.fp8", "select_fp8_moe_backend"),
            "backends": _enum_members(oracle, "Fp8MoeBackend"),
            "oracles_with_model_type_check": sorted(
                n for n, s in oracle_src.items() if "should_auto_disable_deep_gemm" in s
            ),
            "has_get_priority_backends": _func(oracle, "_get_priority_backends") is not None,
        },
        "auto_disable": {
            "excluded_kind": _module_global_kind(dgu, "_DEEPGEMM_BLACKWELL_EXCLUDED_MODEL_TYPES"),
            "importers": _importers(root, "vllm.utils.deep_gemm", "should_auto_disable_deep_gemm"),
        },
        "warmup": {
            "deep_gemm_warmup_functions": [
                f for f in _top_functions(warm) if "may_use" in f or f.endswith("_linear_data")
            ],
            "kernel_warmup_params": _params(_func(kwarm, "kernel_warmup")),
            "kernel_warmup_importers": _importers(root, "vllm.model_executor.warmup.kernel_warmup", "kernel_warmup"),
        },
        "router": {
            "fp32_supported_shapes": _class_attr_literal(gate, "GateLinear", "FP32_SUPPORTED_SHAPES"),
            "allow_flags": _self_attrs(gate_init, "allow_"),
            "init_params": _params(gate_init),
            "bf16x3_opt_in": "enable_bf16x3_router_gemm" in gate_src,
            "cublas_capable_gate": "_router_gemm_cublas_capable" in gate_src,
            "register_oot": "def register_oot" in custom_op,
        },
        "deep_gemm_vendored": {
            "present": dg_vendored.is_dir(),
            "sm120_fp8_gemm_marker": any(
                "sm120_fp8_fp4_gemm_1d1d" in line for line in (root / "deepgemm-listing.txt").read_text().splitlines()
            )
            if (root / "deepgemm-listing.txt").is_file()
            else (dg_vendored / "include/deep_gemm/impls/sm120_fp8_fp4_gemm_1d1d.cuh").is_file(),
        },
    }


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out = {}
    for arg in argv:
        info = scan(Path(arg))
        out[info["version"]] = info
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
