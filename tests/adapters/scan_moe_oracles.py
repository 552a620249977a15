"""Scan extracted vLLM releases for the MXFP4 / MXFP8 / NVFP4 MoE oracles (writes JSON to stdout).

``python tests/adapters/scan_moe_oracles.py /tmp/vllm-src > tests/adapters/data/vllm-moe-oracles-scan.json``
where ``/tmp/vllm-src/<version>/vllm`` is each release's unzipped wheel. The table in
``kernelpolicy.adapters.vllm._versions`` is checked against the output.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

_ORACLE = "vllm.model_executor.layers.fused_moe.oracle."
_ENUMS = {"mxfp4": "Mxfp4MoeBackend", "mxfp8": "Fp8MoeBackend", "nvfp4": "NvFp4MoeBackend"}


def _names(tree: ast.Module) -> list[str]:
    """The keys of the ``moe_backend`` name map (``map_*_backend`` or ``_BACKEND_NAME_MAP``)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("map_"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict) and sub.keys and all(isinstance(k, ast.Constant) for k in sub.keys):
                    return sorted(str(k.value) for k in sub.keys if isinstance(k, ast.Constant))
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == "_BACKEND_NAME_MAP" and isinstance(node.value, ast.Dict):
                return sorted(str(k.value) for k in node.value.keys if isinstance(k, ast.Constant))
    return []


def _enum_members(files: dict[str, Path], scheme: str, tree: ast.Module) -> list[str]:
    name = _ENUMS[scheme]
    trees = [tree] if scheme != "mxfp8" else [ast.parse(files[_ORACLE + "fp8"].read_text(encoding="utf-8"))]
    for t in trees:
        for node in t.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return [
                    s.targets[0].id
                    for s in node.body
                    if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                ]
    return []


def scan(version_dir: Path) -> dict[str, Any]:
    files = {
        ".".join(f.relative_to(version_dir).with_suffix("").parts): f for f in (version_dir / "vllm").rglob("*.py")
    }
    trees: dict[str, ast.Module] = {}
    for mod, path in files.items():
        try:
            trees[mod] = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
    out: dict[str, Any] = {"version": version_dir.name}
    for scheme in ("mxfp4", "mxfp8", "nvfp4"):
        module = _ORACLE + scheme
        tree = trees[module]
        functions = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("select_"))
        importers = sorted(
            {
                mod
                for mod, t in trees.items()
                for n in t.body  # module-level imports only: those hold a by-name copy
                if isinstance(n, ast.ImportFrom) and n.module == module and any(a.name in functions for a in n.names)
            }
        )
        out[scheme] = {
            "module": module,
            "functions": functions,
            "enum": _ENUMS[scheme],
            "backends": _enum_members(files, scheme, tree),
            "names": _names(tree),
            "importers": importers,
        }
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "/tmp/vllm-src")
    data = {d.name: scan(d) for d in sorted(root.iterdir()) if (d / "vllm").is_dir()}
    json.dump(data, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
