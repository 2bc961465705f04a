"""The package's structure, checked from its source: folders are layers, data walks one way.

Each module's imports are read from its syntax tree (imports inside functions count, those under
``if TYPE_CHECKING:`` do not). Then:
- no import cycle among the package's modules;
- a layer imports only itself and the layers above it (LAYERS, top first);
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
              "deepgym_ray.textfiles")),
    ("judge", ("deepgym_ray.judge",)),
    ("environments", ("deepgym_ray.envs", "deepgym_ray.suites")),
    ("sandboxes", ("deepgym_ray.sandboxes",)),
    ("scoring", ("deepgym_ray.scoring",)),
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


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports (absolute names; a ``from X import y`` that names a
    submodule counts as importing it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
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
    graph = {m: [i for i in _inside(m) if i != m] for m in MODULES}
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


@pytest.mark.parametrize("rule, bad", [
    ("cycle", {"deepgym_ray.models": {"deepgym_ray.client"}}),
    ("ray", {"deepgym_ray.client": {"ray"}}),
])
def test_the_checks_catch_what_they_are_for(monkeypatch, rule, bad):
    """The checks above fail on a planted violation (so their passing means something)."""
    planted = {m: set(i) for m, i in IMPORTS.items()}
    for module, extra in bad.items():
        planted[module] |= extra
    monkeypatch.setattr(sys.modules[__name__], "IMPORTS", planted)
    checks = {"cycle": test_no_import_cycle, "ray": test_only_the_pool_and_integrations_import_ray}
    with pytest.raises(AssertionError):
        checks[rule]()
