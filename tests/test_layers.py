"""The package's structure, checked from its source: folders are layers, data walks one way.

Each module's imports are read from its syntax tree (imports inside functions count). Then:
- no circle of knowledge among the package's modules: no import cycle, counting the imports
  under ``if TYPE_CHECKING:`` too (a type-only import is knowledge of the other side all the
  same), so two modules that need a shared name take it from a third;
- a layer imports only itself and the layers above it (LAYERS, top first; type-only imports
  are left out here, since a lower layer may name a type of the layer that drives it);
- only ``pool/`` and the integrations that need it import Ray;
- ``judge/`` imports nothing but the standard library and its own files (they run in sandboxes
  whose interpreter has nothing else).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "deepgym_ray"

# Top first. A module belongs to the first layer whose prefix matches its name.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("deepgym_ray", "deepgym_ray.contract", "deepgym_ray.models",
              "deepgym_ray.exceptions", "deepgym_ray.completions", "deepgym_ray.config",
              "deepgym_ray.textfiles", "deepgym_ray.repo_tasks", "deepgym_ray.multi_turn",
              "deepgym_ray.masked_rate")),
    ("judge", ("deepgym_ray.judge",)),
    ("envs", ("deepgym_ray.envs",)),
    ("suites", ("deepgym_ray.suites",)),
    ("images", ("deepgym_ray.images",)),
    ("sandboxes", ("deepgym_ray.sandboxes",)),
    ("scoring", ("deepgym_ray.scoring",)),
    ("sessions", ("deepgym_ray.sessions",)),
    ("pool", ("deepgym_ray.pool",)),
    ("client", ("deepgym_ray.client",)),
    ("reward", ("deepgym_ray.reward",)),
    ("integrations", ("deepgym_ray.integrations",)),
    ("cli", ("deepgym_ray.cli",)),
]
RAY_ALLOWED = ("deepgym_ray.pool", "deepgym_ray.integrations")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).parts
        if rel[0] == "envs" and len(rel) > 2:  # an environment's own files, not the package's
            continue
        found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, type_only: bool = False) -> set[str]:
    """Every module ``name`` imports (absolute names; a ``from X import y`` that names a
    submodule counts as importing it); with ``type_only``, those under TYPE_CHECKING too."""
    return _imports_of(name, path.read_text(encoding="utf-8"), path.name == "__init__.py",
                       type_only)


def _imports_of(name: str, source: str, is_package: bool, type_only: bool) -> set[str]:
    tree = ast.parse(source)
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            submodules = {f"{source}.{a.name}" for a in node.names} & MODULES.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):  # names defined in ``source`` itself
                found.add(source)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}
# What each module knows of: its imports, type-only ones included.
KNOWS = {name: _imports(name, path, type_only=True) for name, path in MODULES.items()}


def _layer(module: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if prefix == "deepgym_ray" and module != "deepgym_ray":
                continue
            if module == prefix or module.startswith(prefix + "."):
                return index
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def _inside(module: str) -> list[str]:
    return sorted(i for i in IMPORTS[module] if i in MODULES)


def test_every_module_is_in_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_import_cycle():
    graph = {m: sorted(i for i in KNOWS[m] if i in MODULES and i != m) for m in MODULES}
    # Tarjan's strongly connected components: a component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in graph:
        if node not in index:
            connect(node)
    assert not cycles, f"import cycles: {cycles}"


def test_layers_import_only_themselves_and_the_layers_above():
    upward = [f"{m} ({LAYERS[_layer(m)][0]}) imports {i} ({LAYERS[_layer(i)][0]})"
              for m in MODULES for i in _inside(m) if _layer(i) > _layer(m)]
    assert not upward, "\n".join(upward)


def test_only_the_pool_and_integrations_import_ray():
    offenders = [f"{m} imports {i}" for m in MODULES for i in IMPORTS[m]
                 if (i == "ray" or i.startswith("ray.")) and not m.startswith(RAY_ALLOWED)]
    assert not offenders, "\n".join(offenders)


def test_the_judge_imports_only_the_standard_library_and_itself():
    judge_files = {p.stem for p in (PACKAGE / "judge").glob("deepgym_*.py")}
    offenders = []
    for module in MODULES:
        if not module.startswith("deepgym_ray.judge."):
            continue
        for imported in IMPORTS[module]:
            top = imported.split(".")[0]
            if top in sys.stdlib_module_names or top in judge_files or top == "__future__" \
                    or imported.startswith("deepgym_ray.judge."):  # itself, by package path
                continue
            offenders.append(f"{module} imports {imported}")
    assert not offenders, "\n".join(offenders)


# The knots issue 35 untied, planted back as the source line that made each (the type-only and
# lazy imports that made them are what the checks must see), and two plain violations.
TYPE_ONLY = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {} import {}\n"
LAZY = "def f():\n    from {} import {}\n"
PLANTED = {
    # serve_app knew serve's settings while serve deploys serve_app
    "serve circle": ("cycle", "deepgym_ray.integrations.serve_app",
                     TYPE_ONLY.format("deepgym_ray.integrations.serve", "ServeSettings")),
    # liveness knew the pool, whose map call (ordered_map) holds a liveness
    "liveness circle": ("cycle", "deepgym_ray.pool.liveness",
                        TYPE_ONLY.format("deepgym_ray.pool.verifier_pool", "VerifierPool")),
    "ordered map circle": ("cycle", "deepgym_ray.pool.ordered_map",
                           TYPE_ONLY.format("deepgym_ray.pool", "VerifierPool")),
    # envs resolved suite names by importing suites, a layer below it
    "envs to suites": ("layers", "deepgym_ray.envs.registry",
                       LAZY.format("deepgym_ray.suites", "list_suites")),
    "models to client": ("cycle", "deepgym_ray.models",
                         LAZY.format("deepgym_ray.client", "DeepGym")),
    "client to ray": ("ray", "deepgym_ray.client", "import ray\n"),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_the_checks_catch_what_they_are_for(monkeypatch, case):
    """The checks above fail on a planted violation (so their passing means something)."""
    rule, module, line = PLANTED[case]
    is_package = MODULES[module].name == "__init__.py"
    checks = {"cycle": test_no_import_cycle, "ray": test_only_the_pool_and_integrations_import_ray,
              "layers": test_layers_import_only_themselves_and_the_layers_above}
    checks[rule]()  # holds as the package is
    for table, type_only in (("IMPORTS", False), ("KNOWS", True)):
        planted = {m: set(i) for m, i in getattr(sys.modules[__name__], table).items()}
        planted[module] |= _imports_of(module, line, is_package, type_only)
        monkeypatch.setattr(sys.modules[__name__], table, planted)
    with pytest.raises(AssertionError):
        checks[rule]()
