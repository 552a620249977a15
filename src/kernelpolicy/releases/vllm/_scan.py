"""Read what one vLLM release decides about FP8 kernels from its wheel, without importing it.

``python -m kernelpolicy.releases.vllm._scan [--download VERSION ...] [WHEEL ...]`` scans each
release and writes the records into ``releases.json`` beside this module, the one source of
vLLM's per-release facts: the plugin's patch tables (:mod:`.versions`) are built from it, and
``python -m kernelpolicy._docs`` generates ``rules/implies/vllm_releases.yaml`` and
``rules/backends/dense.vllm.yaml`` from it (``tests/tools`` fail when they drift).

A release is read from its wheel (a ``.whl`` file, or a folder holding the installed or unzipped
``vllm/`` package); its source distribution, where given, adds the DeepGEMM commit vLLM builds
its vendored copy from (``cmake/external_projects/deepgemm.cmake``; the wheel carries only the
version). Every value comes from ``ast`` or a literal file read: nothing of vLLM runs.
"""

from __future__ import annotations

import ast
import re
import tarfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from .modules import (
    DENSE_MODULE,
    DG_KERNEL_MODULE,
    DG_UTILS_MODULE,
    ENVS_MODULE,
    GATE_LINEAR_MODULE,
    MOE_ORACLE_MODULE,
    WARMUP_MODULE,
    source_file,
)

__all__ = [
    "DENSE_TABLES",
    "PUBLISHED",
    "RELEASES_FILE",
    "ScanError",
    "index_versions",
    "main",
    "scan_release",
    "write_releases",
]

_LINEAR: Final = source_file(DENSE_MODULE, package=True)
_DG_KERNEL: Final = source_file(DG_KERNEL_MODULE)
_ORACLES: Final = source_file(MOE_ORACLE_MODULE).rpartition("/")[0] + "/"
_WARMUP: Final = source_file(WARMUP_MODULE)
_GATE: Final = source_file(GATE_LINEAR_MODULE)
_DG_UTILS: Final = source_file(DG_UTILS_MODULE)
_ENVS: Final = source_file(ENVS_MODULE)
_VENDORED: Final = "vllm/third_party/deep_gemm/"
_SM120_GEMM: Final = _VENDORED + "include/deep_gemm/impls/sm120_fp8_fp4_gemm_1d1d.cuh"
_DG_CMAKE: Final = "cmake/external_projects/deepgemm.cmake"

#: scheme -> the module-level table of ``kernels/linear`` that lists its CUDA kernels in priority order
DENSE_TABLES: Final[Mapping[str, str]] = {
    "fp8_block": "_POSSIBLE_FP8_BLOCK_KERNELS",
    "fp8_tensor": "_POSSIBLE_FP8_KERNELS",
    "mxfp8": "_POSSIBLE_MXFP8_KERNELS",
    "nvfp4": "_POSSIBLE_NVFP4_KERNELS",
    "mxfp4": "_POSSIBLE_MXFP4_KERNELS",
}
_MOE_ENUMS: Final = {
    "fp8": "Fp8MoeBackend",
    "mxfp4": "Mxfp4MoeBackend",
    "mxfp8": "Fp8MoeBackend",
    "nvfp4": "NvFp4MoeBackend",
}
_SELECT: Final = {"fp8": "select_fp8_moe_backend"}
#: environment variables that bear on kernel choice (the rest of ``vllm.envs`` is left out)
_KERNEL_ENV: Final = re.compile(
    r"DEEP_?GEMM|MOE|FP8|FP4|FLASHINFER|MARLIN|CUTLASS|TRITON|GEMM|B12X|HUMMING|KERNEL|ROUTER"
)
#: the packages whose pins the rules read, as ``Requires-Dist`` names them
_PINNED: Final = ("torch", "flashinfer-python", "flashinfer-cubin", "nvidia-cutlass-dsl")


class ScanError(Exception):
    """A file is not a vLLM release kernelpolicy can read (the message names the file)."""


# -- where the files come from


class _Files:
    """The files of one release: a wheel, an installed or unzipped tree, or a source tarball."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._tar: dict[str, bytes] | None = None
        if path.is_dir():
            return
        if zipfile.is_zipfile(path):
            self._zip = zipfile.ZipFile(path)
        elif tarfile.is_tarfile(path):
            self._tar = _tar_members(path)
        else:
            raise ScanError(f"`{path}` is neither a folder, a wheel nor a source tarball")

    def names(self) -> Iterator[str]:
        if self._zip is not None:
            yield from self._zip.namelist()
        elif self._tar is not None:
            yield from self._tar
        else:  # an install: only vLLM's own files, not the whole site-packages
            for top in sorted([self.path / "vllm", *self.path.glob("vllm-*.dist-info")]):
                for p in sorted(top.rglob("*")):
                    if p.is_file():
                        yield p.relative_to(self.path).as_posix()

    def read(self, rel: str) -> str | None:
        data: bytes | None
        if self._zip is not None:
            try:
                data = self._zip.read(rel)
            except KeyError:
                data = None
        elif self._tar is not None:
            data = self._tar.get(rel)
        else:
            p = self.path / rel
            data = p.read_bytes() if p.is_file() else None
        return None if data is None else data.decode("utf-8", errors="replace")

    def exists(self, rel: str) -> bool:
        if self._zip is not None:
            try:
                self._zip.getinfo(rel)
            except KeyError:
                return False
            return True
        if self._tar is not None:
            return rel in self._tar
        return (self.path / rel).is_file()

    def tree(self, rel: str) -> ast.Module | None:
        text = self.read(rel)
        if text is None:
            return None
        try:
            return ast.parse(text)
        except SyntaxError as exc:
            raise ScanError(f"`{self.path}`: {rel} does not parse ({exc.msg}, line {exc.lineno})") from None


def _tar_members(path: Path) -> dict[str, bytes]:
    """The few files of a source tarball the scan reads, keyed without the top folder."""
    wanted = (_DG_CMAKE, "PKG-INFO")
    out: dict[str, bytes] = {}
    with tarfile.open(path) as tar:
        for m in tar:
            rel = PurePosixPath(*PurePosixPath(m.name).parts[1:]).as_posix()
            if m.isfile() and rel in wanted:
                f = tar.extractfile(m)
                if f is not None:
                    out[rel] = f.read()
    return out


# -- small ast readers


def _assigned(tree: ast.Module | None, name: str) -> ast.expr | None:
    """The value of the module-level ``NAME = ...`` (or annotated) assignment."""
    for node in tree.body if tree else ():
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.value
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    return None


def _func(tree: ast.AST | None, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _class(tree: ast.AST | None, name: str) -> ast.ClassDef | None:
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _params(fn: ast.FunctionDef | None) -> list[str]:
    if fn is None:
        return []
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args] + [f"*{p.arg}" for p in a.kwonlyargs]


def _cuda_list(tree: ast.Module | None, table: str) -> list[str]:
    """Class names in ``TABLE[PlatformEnum.CUDA]`` of a module-level dict literal."""
    value = _assigned(tree, table)
    if not isinstance(value, ast.Dict):
        return []
    for key, val in zip(value.keys, value.values, strict=True):
        if isinstance(key, ast.Attribute) and key.attr == "CUDA" and isinstance(val, ast.List):
            return [e.id for e in val.elts if isinstance(e, ast.Name)]
    return []


def _members(cls: ast.ClassDef | None) -> list[str]:
    if cls is None:
        return []
    return [t.id for s in cls.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)]


def _enum_refs(node: ast.AST, enum: str) -> list[str]:
    """``ENUM.MEMBER`` references under *node*, in source order."""
    refs = [
        (n.lineno, n.col_offset, n.attr)
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == enum
    ]
    return [attr for *_, attr in sorted(refs)]


def _capability(test: ast.expr) -> dict[str, Any]:
    """What an ``if`` test says about the GPU: ``{"sm": 90}`` or ``{"family": 100}``, or nothing."""
    for n in ast.walk(test):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
            arg = n.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                if n.func.attr == "is_device_capability":
                    return {"sm": arg.value}
                if n.func.attr == "is_device_capability_family":
                    return {"family": arg.value}
    return {}


def _moves(fn: ast.FunctionDef, enum: str) -> list[dict[str, Any]]:
    """``_move_to_front(..., ENUM.X)`` calls under the ``if`` tests that guard them."""
    out: list[dict[str, Any]] = []

    def visit(body: list[ast.stmt], guards: tuple[ast.expr, ...]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                visit(stmt.body, (*guards, stmt.test))
                visit(stmt.orelse, (*guards, ast.UnaryOp(ast.Not(), stmt.test)))
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                name = call.func.id if isinstance(call.func, ast.Name) else ""
                refs = _enum_refs(call, enum)
                if "move_to_front" in name and refs:
                    cap: dict[str, Any] = {}
                    for g in guards:
                        cap |= _capability(g)
                    out.append({"backend": refs[-1], "gpu": cap, "when": " and ".join(ast.unparse(g) for g in guards)})

    visit(fn.body, ())
    return out


def _importers(files: _Files, module: str, names: tuple[str, ...]) -> list[str]:
    """Modules of vLLM holding a module-level by-name copy (``from MODULE import NAME``)."""
    found: set[str] = set()
    for rel in files.names():
        if not (rel.startswith("vllm/") and rel.endswith(".py")):
            continue
        text = files.read(rel) or ""
        if module not in text or not any(n in text for n in names):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == module and any(a.name in names for a in node.names):
                found.add(rel.removesuffix(".py").removesuffix("/__init__").replace("/", "."))
    return sorted(found)


def _module(rel: str) -> str:
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


# -- the sections of one record


@dataclass
class _Release:
    files: _Files

    def version(self) -> tuple[str, str | None]:
        meta = next((n for n in self.files.names() if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", n)), None)
        text = self.files.read(meta) if meta else None
        if text is None:
            raise ScanError(f"`{self.files.path}` holds no vllm-*.dist-info/METADATA: not a vLLM wheel or install")
        version = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("Version:")), "")
        if not version:
            raise ScanError(f"`{self.files.path}`: {meta} names no Version")
        commit = _assigned(self.files.tree("vllm/_version.py"), "__commit_id__")
        return version, commit.value if isinstance(commit, ast.Constant) and isinstance(commit.value, str) else None

    def requires(self) -> dict[str, str]:
        meta = next(n for n in self.files.names() if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", n))
        pins: dict[str, str] = {}
        for ln in (self.files.read(meta) or "").splitlines():
            m = re.fullmatch(r"Requires-Dist: ([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*==\s*([^;\s]+)\s*", ln)
            if m and m.group(1).lower() in _PINNED:
                pins[m.group(1).lower()] = m.group(2)
        return pins

    def dense(self) -> dict[str, Any]:
        tree = self.files.tree(_LINEAR)
        if tree is None:
            raise ScanError(f"`{self.files.path}` has no {_LINEAR}: a vLLM release before 0.24 is not supported")
        return {
            "module": _module(_LINEAR),
            "priority": {scheme: _cuda_list(tree, table) for scheme, table in DENSE_TABLES.items()},
            "choose_params": _params(_func(tree, "choose_scaled_mm_linear_kernel")),
            "init_fp8_importers": _importers(self.files, _module(_LINEAR), ("init_fp8_linear_kernel",)),
            "deep_gemm_kernel": self.files.exists(_DG_KERNEL),
            "classes": self._kernel_classes(),
        }

    def _kernel_classes(self) -> list[str]:
        """Every ``*Kernel`` class defined under ``kernels/linear/`` (tables list only some)."""
        folder = _LINEAR.rsplit("/", 1)[0] + "/"
        found: set[str] = set()
        for rel in self.files.names():
            if rel.startswith(folder) and rel.endswith(".py"):
                tree = self.files.tree(rel)
                found |= (
                    {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name.endswith("Kernel")}
                    if tree
                    else set()
                )
        return sorted(found)

    def moe(self) -> dict[str, Any]:
        fp8 = self.files.tree(_ORACLES + "fp8.py")
        out: dict[str, Any] = {}
        for scheme, enum in _MOE_ENUMS.items():
            rel = f"{_ORACLES}{scheme}.py"
            tree = self.files.tree(rel)
            if tree is None:
                raise ScanError(f"`{self.files.path}` has no {rel}")
            functions = sorted(
                n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("select_")
            )
            if scheme in _SELECT:
                functions = [_SELECT[scheme]]
            entry: dict[str, Any] = {
                "module": _module(rel),
                "functions": functions,
                "enum": enum,
                "backends": _members(_class(fp8 if enum == "Fp8MoeBackend" else tree, enum)),
                "names": _name_map(tree),
                "importers": _importers(self.files, _module(rel), tuple(functions)),
                "checks_model_type": "should_auto_disable_deep_gemm" in (self.files.read(rel) or ""),
            }
            prio = _func(tree, "_get_priority_backends")
            if prio is not None:
                base = next(
                    (n.value for n in ast.walk(prio) if isinstance(n, ast.Assign) and isinstance(n.value, ast.List)),
                    None,
                )
                entry["priority"] = _enum_refs(base, enum) if base is not None else []
                entry["move_to_front"] = _moves(prio, enum)
            out[scheme] = entry
        return out

    def auto_disable(self) -> dict[str, Any]:
        value = _assigned(self.files.tree(_DG_UTILS), "_DEEPGEMM_BLACKWELL_EXCLUDED_MODEL_TYPES")
        return {
            "excluded_kind": type(value).__name__ if value is not None else None,
            "importers": _importers(self.files, _module(_DG_UTILS), ("should_auto_disable_deep_gemm",)),
        }

    def warmup(self) -> dict[str, Any]:
        tree = self.files.tree(_WARMUP)
        tops = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] if tree else []
        return {
            "module": _module(_WARMUP),
            "gates": [f for f in tops if "may_use" in f or f.endswith("_linear_data")],
        }

    def router(self) -> dict[str, Any]:
        tree = self.files.tree(_GATE)
        gate = _class(tree, "GateLinear")
        init = (
            next((s for s in gate.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            if gate
            else None
        )
        flags = sorted(
            {
                n.attr
                for n in ast.walk(init)
                if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
                and n.attr.startswith("allow_")
                and isinstance(n.ctx, ast.Store)
            }
            if init
            else ()
        )
        shapes = None
        for s in gate.body if gate else ():
            if isinstance(s, ast.Assign | ast.AnnAssign):
                target = s.target if isinstance(s, ast.AnnAssign) else s.targets[0]
                if isinstance(target, ast.Name) and target.id == "FP32_SUPPORTED_SHAPES" and s.value is not None:
                    shapes = sorted(list(x) for x in ast.literal_eval(s.value))
        src = self.files.read(_GATE) or ""
        return {
            "module": _module(_GATE),
            "allow_flags": flags,
            "fp32_supported_shapes": shapes,
            "bf16x3_opt_in": "enable_bf16x3_router_gemm" in src,
            "cublas_capable_gate": "_router_gemm_cublas_capable" in src,
        }

    def _env_table(self) -> ast.Dict:
        value = _assigned(self.files.tree(_ENVS), "environment_variables")
        if not isinstance(value, ast.Dict):
            raise ScanError(f"`{self.files.path}`: {_ENVS} has no `environment_variables` dict")
        return value

    def env(self) -> list[str]:
        value = self._env_table()
        names = (k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        return sorted(n for n in names if _KERNEL_ENV.search(n))

    def env_parsers(self) -> dict[str, dict[str, Any]]:
        """How this release parses each variable of :meth:`env` (see :func:`_env_parser`)."""
        table = self._env_table()
        out: dict[str, dict[str, Any]] = {}
        for k, v in zip(table.keys, table.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and _KERNEL_ENV.search(k.value):
                out[k.value] = _env_parser(v)
        return dict(sorted(out.items()))

    def deep_gemm(self) -> dict[str, Any]:
        init = _assigned(self.files.tree(_VENDORED + "__init__.py"), "__version__")
        return {
            "version": init.value if isinstance(init, ast.Constant) and isinstance(init.value, str) else None,
            "sm120_fp8_gemm": self.files.exists(_SM120_GEMM),
        }


def _env_read(node: ast.expr) -> tuple[bool, list[str]]:
    """Whether *node* reads the variable's text (``os.getenv``, ``os.environ.get`` or
    ``os.environ[...]``), and the string methods applied to it, innermost first."""
    methods: list[str] = []
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("strip", "lower", "upper")
        and not node.args
    ):
        methods.insert(0, node.func.attr)
        node = node.func.value
    text = ast.unparse(node)
    read = re.match(r"os\.(getenv|environ\.get)\(|os\.environ\[", text) is not None
    return read, methods


def _literal_strs(node: ast.expr | None) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple | ast.Set) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def _call_parser(node: ast.Call) -> dict[str, Any] | None:
    """``bool(int(text))``, ``int(text)`` or ``env_with_choices(...)``; ``None`` for other calls."""
    if not isinstance(node.func, ast.Name):
        return None
    name, args = node.func.id, node.args
    if name in ("bool", "int") and len(args) == 1:
        inner = args[0]
        if name == "bool":
            if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "int"):
                return None
            if len(inner.args) != 1:
                return None
            inner = inner.args[0]
        read, methods = _env_read(inner)
        return {"kind": "int_flag" if name == "bool" else "int"} if read and not methods else None
    if name == "env_with_choices" and len(args) >= 3:
        choices = _literal_strs(args[2])
        keyword = next((kw.value for kw in node.keywords if kw.arg == "case_sensitive"), None)
        case = args[3] if len(args) > 3 else keyword
        sensitive = True if case is None else case.value if isinstance(case, ast.Constant) else None
        if choices is not None and isinstance(sensitive, bool):
            return {"kind": "choices", "choices": choices, "case_sensitive": sensitive}
    return None


def _env_parser(node: ast.expr) -> dict[str, Any]:
    """How ``vllm.envs`` turns a variable's text into its value, from the table entry *node*:

    ``{"kind": "int_flag"}`` ``bool(int(text))`` (``int()`` refuses what is not an integer);
    ``{"kind": "int"}`` ``int(text)``; ``{"kind": "choices", "choices": [...],
    "case_sensitive": bool}`` ``env_with_choices`` (refuses any other value);
    ``{"kind": "truthy", "true": [...], "methods": [...]}`` ``text.strip().lower() in (...)``
    (also ``text == "1"``); ``{"kind": "text", "methods": [...]}`` the text itself (lowered
    where vLLM lowers it); ``{"kind": "other"}`` any other form (the value is taken as written).
    """
    if isinstance(node, ast.Lambda):
        node = node.body
    if isinstance(node, ast.IfExp):  # `bool(int(os.environ[X])) if X in os.environ else default`
        node = node.body
    if isinstance(node, ast.Call) and (found := _call_parser(node)) is not None:
        return found
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        read, methods = _env_read(node.left)
        op, right = node.ops[0], node.comparators[0]
        if read and isinstance(op, ast.In) and (true := _literal_strs(right)) is not None:
            return {"kind": "truthy", "true": true, "methods": methods}
        if read and isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return {"kind": "truthy", "true": [right.value], "methods": methods}
    read, methods = _env_read(node)
    return {"kind": "text", "methods": methods} if read else {"kind": "other"}


def _name_map(tree: ast.Module) -> list[str]:
    """The keys of a MoE oracle's ``moe_backend`` name map (``map_*_backend`` or ``_BACKEND_NAME_MAP``)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("map_"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict) and sub.keys and all(isinstance(k, ast.Constant) for k in sub.keys):
                    return sorted(str(k.value) for k in sub.keys if isinstance(k, ast.Constant))
    value = _assigned(tree, "_BACKEND_NAME_MAP")
    if isinstance(value, ast.Dict):
        return sorted(str(k.value) for k in value.keys if isinstance(k, ast.Constant))
    return []


def _deep_gemm_pin(sdist: Path) -> dict[str, str]:
    """The DeepGEMM repository and commit a vLLM source release builds (``deepgemm.cmake``)."""
    text = _Files(sdist).read(_DG_CMAKE)
    if text is None:
        raise ScanError(f"`{sdist}` has no {_DG_CMAKE}")
    repo = re.search(r'_DEEPGEMM_UPSTREAM_REPO\s+"https://github\.com/([^"]+?)(?:\.git)?"', text)
    tag = re.search(r'_DEEPGEMM_UPSTREAM_TAG\s+"([0-9a-f]{40})"', text)
    if not (repo and tag):
        raise ScanError(f"`{sdist}`: {_DG_CMAKE} names no DeepGEMM repository and commit")
    return {"repo": repo.group(1), "commit": tag.group(1)}


def scan_release(path: Path, sdist: Path | None = None) -> dict[str, Any]:
    """The record of the vLLM release at *path* (wheel or tree), with *sdist*'s DeepGEMM pin."""
    rel = _Release(_Files(path))
    version, commit = rel.version()
    record: dict[str, Any] = {
        "version": version,
        "commit": commit,
        "requires": rel.requires(),
        "dense": rel.dense(),
        "moe": rel.moe(),
        "auto_disable": rel.auto_disable(),
        "warmup": rel.warmup(),
        "router": rel.router(),
        "env": rel.env(),
        "env_parsers": rel.env_parsers(),
        "deep_gemm": rel.deep_gemm(),
    }
    if sdist is not None:
        pin = _deep_gemm_pin(sdist)
        sdist_version = re.search(r"^Version:\s*(\S+)", _Files(sdist).read("PKG-INFO") or "", re.M)
        if sdist_version and sdist_version.group(1) != version:
            raise ScanError(f"`{sdist}` is vLLM {sdist_version.group(1)}, the wheel {version}")
        record["deep_gemm"] |= pin
    return record


# -- the command: scan releases into releases.json

#: the data file this module writes and :mod:`.versions` reads
RELEASES_FILE: Final = Path(__file__).with_name("releases.json")
_PYPI: Final = "https://pypi.org/pypi/vllm/{version}/json"


def _download(version: str, into: Path) -> tuple[Path, Path]:
    """The CUDA x86_64 wheel and the source tarball of vLLM *version*, fetched into *into*."""
    import json
    import urllib.request

    with urllib.request.urlopen(_PYPI.format(version=version), timeout=60) as resp:
        meta = json.load(resp)
    files: dict[str, Path] = {}
    for f in meta.get("urls", ()):
        name = f["filename"]
        kind = "sdist" if f["packagetype"] == "sdist" else "wheel" if "manylinux" in name and "x86_64" in name else None
        if kind is None or kind in files:
            continue
        dest = into / name
        if not dest.is_file():
            tmp = dest.with_suffix(".part")
            urllib.request.urlretrieve(f["url"], tmp)
            tmp.replace(dest)
        files[kind] = dest
    if set(files) != {"wheel", "sdist"}:
        raise ScanError(f"vllm {version}: the index has no {' and '.join({'wheel', 'sdist'} - set(files))}")
    return files["wheel"], files["sdist"]


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _sdist_beside(wheel: Path) -> Path | None:
    parts = wheel.name.split("-")
    if wheel.suffix != ".whl" or len(parts) < 2:
        return None
    version = parts[1]
    p = wheel.parent / f"vllm-{version}.tar.gz"
    return p if p.is_file() else None


#: the packages whose published releases the vLLM data file lists (bounds on them are checked)
PUBLISHED: Final = ("vllm", "flashinfer-python")


def index_versions(package: str) -> list[str]:
    """Every release of *package* the package index lists (``pip index versions``), oldest first."""
    import subprocess
    import sys

    from packaging.version import Version

    cmd = [sys.executable, "-m", "pip", "index", "versions", "--disable-pip-version-check", package]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("Available versions:")), None)
    if out.returncode != 0 or line is None:
        raise ScanError(f"`pip index versions {package}` listed no releases (exit status {out.returncode})")
    versions: list[str] = []
    for v in line.split(":", 1)[1].split(","):
        try:
            Version(v.strip())
        except ValueError:  # InvalidVersion, or more digits than int() converts
            continue
        versions.append(v.strip())
    return sorted(versions, key=Version)


def write_releases(
    records: list[dict[str, Any]], path: Path = RELEASES_FILE, published: dict[str, list[str]] | None = None
) -> None:
    """Merge *records* into the data file at *path* (one entry per release, oldest first);
    *published* (package -> releases on the index) replaces the lists of those packages."""
    import json

    from packaging.version import Version

    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    releases = dict(data.get("releases", {}))
    for r in records:
        old = releases.get(r["version"], {}).get("deep_gemm", {})
        new = r.get("deep_gemm")
        if isinstance(new, dict) and "commit" not in new:  # scanned without its source tarball: keep the pin
            r = {**r, "deep_gemm": {**new, **{k: old[k] for k in ("repo", "commit") if k in old}}}  # noqa: PLW2901
        releases[r["version"]] = r
    out = {
        "generated_by": "python -m kernelpolicy.releases.vllm._scan (do not edit)",
        "releases": {v: releases[v] for v in sorted(releases, key=Version)},
    }
    listed = {**data.get("published", {}), **(published or {})}
    if listed:
        out["published"] = dict(sorted(listed.items()))
    path.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from ..._paths import cache_subdir

    ap = argparse.ArgumentParser(
        prog="python -m kernelpolicy.releases.vllm._scan", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("paths", nargs="*", type=Path, help="a vLLM wheel, or a folder holding the vllm/ package")
    ap.add_argument("--download", nargs="+", default=[], metavar="VERSION", help="fetch these releases from PyPI first")
    ap.add_argument("--sdist", type=Path, help="the source tarball of the one release given (found beside a wheel)")
    ap.add_argument("--out", type=Path, default=RELEASES_FILE, help="the data file to update (%(default)s)")
    ap.add_argument(
        "--published",
        action="store_true",
        help=f"also list the releases the package index has of {', '.join(PUBLISHED)} (`check` reads them)",
    )
    args = ap.parse_args(argv)
    pairs: list[tuple[Path, Path | None]] = []
    try:
        for version in args.download:
            pairs.append(_download(version, _mkdir(cache_subdir("wheels") / "vllm")))
        if args.sdist is not None and len(args.paths) != 1:
            raise ScanError("--sdist goes with exactly one wheel")
        pairs += [(p, args.sdist or _sdist_beside(p)) for p in args.paths]
        if not pairs and not args.published:
            ap.error("name a wheel or folder, or --download VERSION, or --published")
        published = {p: index_versions(p) for p in PUBLISHED} if args.published else None
        records = []
        for wheel, sdist in pairs:
            records.append(scan_release(wheel, sdist))
            pin = records[-1]["deep_gemm"].get("commit", "no source tarball: DeepGEMM commit unknown")
            print(f"vllm {records[-1]['version']}: {wheel.name} (DeepGEMM {pin})", file=sys.stderr)
    except (ScanError, OSError) as exc:
        print(f"kernelpolicy: {exc}", file=sys.stderr)
        return 2
    write_releases(records, args.out, published)
    print(f"wrote {args.out}; now run `python -m kernelpolicy._docs` to regenerate the rules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
