"""The package layout, drawn from the imports in the source (ast, nothing imported).

The core decides engine-free: no arrow from the core to an engine, its release data, the fact
assembly, a rendering or the command line; facts/ knows nothing of the rule language, the
policy or an engine; release data imports no engine slice; and no import circle runs through
cli/ (a subcommand module imports shared code, never the other way round). docs/design.md draws
the same layout and argues it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = "kernelpolicy"

#: the engine-free core: facts, the rule language, the policy, the resolution and its result
CORE = ("facts", "dsl", "policy", "semantics", "resolver", "decision", "reporters", "errors")
#: what the core must never import
EDGES = ("engines", "releases", "deployment", "render", "tools", "cli", "fleet", "analysis")
#: the one-release shims of old paths (module-level ``__getattr__``): a lazy arrow, named here
SHIM_FUNCTIONS = ("__getattr__",)


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in (SRC / PKG).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, package)
    return out


MODULES = _modules()


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import node, and whether it sits in a shim function (``__getattr__``)."""

    def walk(node: ast.AST, in_shim: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_shim
            shim = in_shim or (isinstance(child, ast.FunctionDef) and child.name in SHIM_FUNCTIONS)
            yield from walk(child, shim)

    yield from walk(tree, False)


def _targets(module: str, package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        name = ".".join(base + ([node.module] if node.module else []))
    else:
        name = node.module or ""
    # `from pkg import submodule` is an arrow to the submodule
    subs = [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in MODULES]
    return [name, *subs]


def _graph(*, shims: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, (path, package) in MODULES.items():
        for node, in_shim in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if in_shim and not shims:
                continue
            for target in _targets(module, package, node):
                if target == PKG or target.startswith(PKG + "."):
                    graph[module].add(target)
    return graph


GRAPH = _graph(shims=False)


def _in(module: str, area: str) -> bool:
    name = f"{PKG}.{area}"
    return module == name or module.startswith(name + ".")


def _arrows(from_areas: tuple[str, ...], to_areas: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{src} -> {dst}"
        for src, dsts in GRAPH.items()
        if any(_in(src, a) for a in from_areas)
        for dst in dsts
        if any(_in(dst, a) for a in to_areas)
    )


def test_the_graph_sees_the_known_arrows() -> None:
    """The reader resolves relative and lazy imports (else the assertions below prove nothing)."""
    assert "kernelpolicy.facts.record" in GRAPH["kernelpolicy.resolver"]
    assert "kernelpolicy.deployment.pipeline" in GRAPH["kernelpolicy.engines.vllm.plugin"]  # inside a function
    assert "kernelpolicy.deployment" in _graph(shims=True)["kernelpolicy.facts"]  # the one-release shim


def test_the_core_imports_no_edge() -> None:
    assert _arrows(CORE, EDGES) == []


def test_facts_import_no_rule_language_policy_or_engine() -> None:
    assert _arrows(("facts",), ("dsl", "policy", "semantics", "resolver", "decision", *EDGES)) == []


def test_release_data_imports_no_engine_slice_nor_engine() -> None:
    # (the generated rule files go through the formatter, tools/fmt: data in, text out)
    assert _arrows(("releases",), ("engines", "deployment", "render", "cli", "fleet")) == []
    engines = ("vllm", "sglang", "torch")
    for module, (path, _) in MODULES.items():
        if _in(module, "releases"):
            for node, _shim in _imports(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not [n for n in names if n.split(".")[0] in engines and not node.__dict__.get("level")], module


#: what asks the engine registry instead of naming an engine: the fact assembly, the renderers,
#: the analyses, the tools and the venv tooling
ASKERS = ("deployment", "render", "analysis", "tools", "_venvs")


def test_nothing_below_the_plugins_imports_an_engine_slice() -> None:
    """No arrow up from the fact assembly (or a renderer, analysis, tool or the venv tooling) to an
    engine's plugin folder: what they need of an engine is its spec, in the registry below."""
    assert _arrows(ASKERS, ("engines",)) == []


def test_the_fact_assembly_and_renderers_name_no_engine() -> None:
    """deployment/ and render/ ask the registry (kernelpolicy.releases) by name, by a launch
    line's command or by an ``--engine`` value: no engine's name is written in their code."""
    names = {"vllm", "sglang", "vLLM", "SGLang"}
    found = []
    for module, (path, _) in MODULES.items():
        if _in(module, "deployment") or _in(module, "render"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in names:
                    found.append(f"{module}:{node.lineno} {node.value!r}")
    assert found == []


def test_every_engine_of_the_registry_has_one_spec_package() -> None:
    """Each engine's flag table, spec and release data sit in one package of the registry."""
    from kernelpolicy.releases import NAMES, spec

    for name in NAMES:
        for part in ("flags", "spec", "versions"):
            assert f"{PKG}.releases.{name}.{part}" in MODULES, (name, part)
        assert spec(name).name == name
        assert spec(name).data_file.is_file()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _without_package_arrows(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Arrows from a package's ``__init__`` to its own submodules are how a package re-exports;
    a submodule importing a sibling through the package is not a circle of code."""
    return {
        src: {dst for dst in dsts if not (dst.startswith(src + ".") and MODULES.get(src, (None, False))[1])}
        for src, dsts in graph.items()
    }


def test_no_import_circle_runs_through_cli() -> None:
    circles = [c for c in _cycles(_without_package_arrows(GRAPH)) if any(_in(m, "cli") for m in c)]
    assert circles == []


@pytest.mark.parametrize("area", ["engines", "deployment", "render", "tools", "releases", "lsp"])
def test_no_import_circle_in_the_new_packages(area: str) -> None:
    circles = [c for c in _cycles(_without_package_arrows(GRAPH)) if any(_in(m, area) for m in c)]
    assert circles == []


def test_the_cycle_finder_finds_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_old_paths_import_as_the_new_modules() -> None:
    """The 0.1 paths stay importable for one release, as the same module objects."""
    import importlib

    from kernelpolicy._moved import MOVED

    for old, new in MOVED.items():
        if new is not None:
            assert importlib.import_module(old) is importlib.import_module(new), old


def _private_arrows() -> list[str]:
    """Arrows into a private module (a ``_name`` component) from outside the package holding it."""
    out = []
    for src, dsts in GRAPH.items():
        for dst in dsts:
            parts = dst.split(".")
            private = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
            if not private:
                continue
            owner = ".".join(parts[: private[0]])  # the package the first private component is in
            if not (src == owner or src.startswith(owner + ".")):
                out.append(f"{src} -> {dst}")
    return sorted(out)


#: named exceptions, each with its reason
PRIVATE_EXCEPTIONS = {
    # the fleet command drives the node side and the optional Ray launcher, which stay private so
    # that `import kernelpolicy.fleet` (the report, pure) never imports Ray
    "kernelpolicy.cli._fleet -> kernelpolicy.fleet._node",
    "kernelpolicy.cli._fleet -> kernelpolicy.fleet._ray",
    "kernelpolicy.cli._fleet -> kernelpolicy.fleet._shim",
    "kernelpolicy.cli._fleet -> kernelpolicy.fleet._files",
    # both release scans ask the package index the same way (`--published`): one query, in the vLLM scan
    "kernelpolicy.releases.sglang._scan -> kernelpolicy.releases.vllm._scan",
}


def test_private_modules_are_imported_only_inside_their_package() -> None:
    assert [a for a in _private_arrows() if a not in PRIVATE_EXCEPTIONS] == []


def _facts_builders() -> list[str]:
    """Modules that construct a ``Facts`` (``Facts(...)``, ``Facts.from_values``, ``Facts._of``)."""
    out = []
    for module, (path, _) in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            owner = f.value if isinstance(f, ast.Attribute) else None
            owner_name = (
                owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            )
            if name == "Facts" or (owner_name == "Facts" and name in ("from_values", "_of", "empty")):
                out.append(module)
                break
    return sorted(out)


#: besides the record itself (facts/) and the assembly (deployment/): the resolution adds implied
#: facts (semantics), and the proofs build the abstract cells they walk (analysis); no deployment
FACTS_BUILDERS = ("facts", "deployment", "semantics", "analysis")


def test_nothing_but_the_assembly_builds_a_deployments_facts() -> None:
    assert [m for m in _facts_builders() if not any(_in(m, a) for a in FACTS_BUILDERS)] == []
