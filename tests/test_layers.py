"""The project's import layers: no cycle between modules, and no import from a lower layer to a
higher one (the rules are in ``cableload_sim/__init__.py``). Read from the sources, lazy
imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cableload_sim", "planners", "backends", "learners", "hw")

CORE = (
    "cableload_sim",
    "cableload_sim.errors",
    "cableload_sim.checks",
    "cableload_sim.rotations",
    "cableload_sim.horizon",
    "cableload_sim.configs",
)
"""The modules every layer may use (and may use each other)."""

LAYERS = {
    "core": 0,
    "cableload_sim.params": 1,
    "cableload_sim.trajectories": 1,
    "cableload_sim.physics": 2,
    "cableload_sim.metrics": 3,
    "cableload_sim.io": 4,
    "cableload_sim.viz": 5,
    "planners": 6,
    "hw.safety": 6.5,
    "backends": 7,
    "learners": 8,
    "hw": 9,
    "cableload_sim.reproduce": 9.5,
    "cableload_sim.cli": 10,
}
"""Each unit's layer: a module may import its own unit and units of lower layers only."""


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _unit(module: str) -> str:
    if module in CORE:
        return "core"
    for unit in sorted(LAYERS, key=len, reverse=True):
        if module == unit or module.startswith(unit + "."):
            return unit
    raise AssertionError(f"{module} belongs to no layer of tests/test_layers.py: add it")


def _imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from package import module`` imports the module; ``from module import name``
            # the module
            names = [
                f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                for alias in node.names
            ]
        else:
            continue
        targets.update(name for name in names if name in MODULES and name != module)
    return targets


GRAPH = {module: _imports(module) for module in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        _unit(module)


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, target) pairs where a module imports another unit of its own or a higher
    layer."""
    wrong = []
    for module, targets in sorted(graph.items()):
        unit = _unit(module)
        wrong += [
            (module, target)
            for target in sorted(targets)
            if _unit(target) != unit and LAYERS[_unit(target)] >= LAYERS[unit]
        ]
    return wrong


@pytest.mark.parametrize("unit", sorted(LAYERS))
def test_no_import_from_a_lower_layer_to_a_higher_one(unit):
    graph = {m: targets for m, targets in GRAPH.items() if _unit(m) == unit}
    assert not upward_imports(graph)


def test_no_import_cycle():
    """Tarjan's strongly connected components of the module graph: each must be one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


def test_the_rule_fires_on_a_simulator_importing_a_planner_or_a_peer():
    graph = {
        "cableload_sim.physics.simulator": {"planners.formation", "cableload_sim.params"},
        "cableload_sim.params.system": {"cableload_sim.trajectories.catalog"},
        "planners.teacher": {"planners.codegen", "cableload_sim.physics.layout"},
    }
    assert upward_imports(graph) == [
        ("cableload_sim.params.system", "cableload_sim.trajectories.catalog"),
        ("cableload_sim.physics.simulator", "planners.formation"),
    ]


def test_the_graph_holds_lazy_imports():
    """``cableload --help`` imports its commands inside functions: they count all the same."""
    assert "learners.dagger" in GRAPH["cableload_sim.cli.main"]


@pytest.mark.parametrize("package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py"))
def test_every_package_says_what_it_may_import_and_what_imports_it(package):
    """Each package opens with a docstring naming what it may import and what imports it."""
    doc = ast.get_docstring(ast.parse(MODULES[package].read_text())) or ""
    if package == "cableload_sim":  # the layers of the whole package, in a list
        assert "may import" in doc
        return
    assert "May import:" in doc and "Imported by:" in doc, package
