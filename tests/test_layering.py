"""Dependencies point down: the core (rulka/) and agents/ know no environment, and no module imports
itself through others."""
import ast
import sys
from pathlib import Path

import pytest

from tests.scripts_as_modules import load_script

ROOT = Path(__file__).resolve().parents[1]
DRAW_ARCHITECTURE = ROOT / "scripts" / "draw_architecture.py"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_trackmania_contract_imports_neither_training_nor_tools():
    """environments/trackmania/'s top modules and its backends and tracks (the environment's contract)
    do not import training/ or tools/: those rooms build on the contract, not the other way round."""
    wing = ROOT / "environments" / "trackmania"
    contract = [*wing.glob("*.py"), *(p for room in ("sim", "tmi", "tracks") for p in (wing / room).rglob("*.py"))]
    offenders = {str(path.relative_to(ROOT)): sorted(n for n in _imports(path)
                                                     if n.startswith(("environments.trackmania.training",
                                                                      "environments.trackmania.tools")))
                 for path in contract}
    assert contract and {k: v for k, v in offenders.items() if v} == {}


def _resolved_imports(path: Path) -> set[str]:
    """The modules ``path`` imports, relative imports resolved against its package."""
    package = list(path.relative_to(ROOT).with_suffix("").parts)
    package = package[:-1]  # a module's package; an __init__'s own package is its folder, also parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


#: environments/trackmania/tmi/'s rooms and the rooms each may import (besides itself).
TMI_ROOMS = {"link": set(), "maps": set(), "games": {"link", "maps"}, "standin": {"link"}}


@pytest.mark.parametrize("room", sorted(TMI_ROOMS))
def test_tmi_rooms_point_down(room):
    """The real game's rooms: link/ (TMInterface's wire, client and state) and maps/ (the game's files) import
    no other room; games/ (launching and supervising games, one game's race cycle) builds on those two; the
    stand-in game on link/ alone; only commands/ and backend.py put everything together."""
    tmi = ROOT / "environments" / "trackmania" / "tmi"
    rooms = {p.name for p in tmi.iterdir() if (p / "__init__.py").exists()} | {"backend"}
    assert set(TMI_ROOMS) | {"commands", "backend"} <= rooms, rooms
    offenders = {}
    for path in (tmi / room).rglob("*.py"):
        used = {name.split(".")[3] for name in _resolved_imports(path)
                if name.startswith("environments.trackmania.tmi.") and len(name.split(".")) > 3}
        wrong = sorted(used - TMI_ROOMS[room] - {room})
        if wrong:
            offenders[str(path.relative_to(ROOT))] = wrong
    assert offenders == {}


@pytest.mark.parametrize("package", ["rulka", "agents", "memories", "filters", "exploration_policies"])
def test_package_does_not_import_an_environment(package):
    """Neither the core nor the agents (nor what they build on) imports anything from environments/
    (at module level or inside a function)."""
    offenders = {str(path.relative_to(ROOT)): sorted(n for n in _imports(path) if n == "environments" or n.startswith("environments."))
                 for path in (ROOT / package).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


# ---------------------------------------------------------------------------------------------
# Import cycles
# ---------------------------------------------------------------------------------------------

#: The project's own code: every module of these folders is a node of the import graph.
PROJECT_FOLDERS = ("rulka", "agents", "memories", "filters", "exploration_policies", "environments", "presets",
                   "bench", "scripts")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_edges(path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """``(imported project module, line)`` for every import statement of ``path``: at the top, in a
    function or a class, in a try block, relative (``from .x import y``) or absolute; a bench or
    scripts file's ``import sibling`` (run as a script, its folder is on sys.path) is its sibling.
    ``from package import name`` imports the submodule ``package.name`` when there is one, else the
    package. Imports under ``if TYPE_CHECKING:`` count too: they do not run, but a type-only import
    that points up still ties the lower module to the higher one (renaming or moving it breaks the
    lower one, and a reader must know both); a lower module names what it needs with a ``Protocol``
    of its own (``environments.trackmania.layout.LayoutSettings``). Not counted:
    ``importlib.import_module`` strings (presets, plugins), decided at run time."""
    name = _module_name(path)
    is_package = path.name == "__init__.py"
    folder_is_package = (path.parent / "__init__.py").is_file()
    package = name.split(".") if is_package else name.split(".")[:-1]

    def resolve(target: str) -> str | None:
        if target in modules:
            return target
        sibling = ".".join([*package, target])
        return sibling if not folder_is_package and sibling in modules else None

    edges: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                edges.extend((resolve(alias.name), child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[:len(package) - (child.level - 1)]
                    module = ".".join([*base, *([child.module] if child.module else [])])
                else:
                    module = child.module
                for alias in child.names:
                    submodule = resolve(f"{module}.{alias.name}")
                    edges.append((submodule or resolve(module), child.lineno))
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return [(target, line) for target, line in edges if target is not None and target != name]


def _import_graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    """The project's modules and, for each, the project modules it imports (with a line that does)."""
    modules = {_module_name(path): path for folder in PROJECT_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        graph[name] = {}
        for target, line in _import_edges(path, modules):
            graph[name].setdefault(target, line)
    return modules, graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per group of modules that import each other: the architecture
    page's strongly connected groups (one Tarjan for both), each walked into its shortest cycle."""
    arrows = {(module, target) for module, targets in graph.items() for target in targets}
    return [_cycle_in(group, graph) for group in load_script(DRAW_ARCHITECTURE).circles(set(graph), arrows)]


def _cycle_in(group: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """The shortest cycle through the group's first module (breadth-first inside the group)."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child in members and child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    return group  # unreachable for a strongly connected group


def test_no_import_cycles():
    """No module of the project imports itself through others (function-level and relative imports
    included): arrows point one way, so a module can be read, tested and moved without the ones
    above it. The failure names each cycle with the file and line of every import in it."""
    modules, graph = _import_graph()
    assert {"rulka.config", "environments.trackmania.layout", "presets.cartpole_iqn", "bench.update_speed",
            "scripts.reliability_report"} <= set(modules)
    described = []
    for cycle in _cycles(graph):
        steps = [f"{a} -> {b} ({modules[a].relative_to(ROOT)}:{graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
        described.append(" -> ".join(cycle) + "\n      " + "\n      ".join(steps))
    assert not described, "import cycles:\n  " + "\n  ".join(described)


def test_import_graph_sees_every_kind_of_import(tmp_path, monkeypatch):
    """The cycle test's graph counts function-level, relative, ``if TYPE_CHECKING:`` and
    sibling-script imports, and names a cycle it is given: a test that could not fail would protect
    nothing."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import g\n")
    (package / "b.py").write_text("import pkg.a\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n")
    (package / "d.py").write_text("from pkg.c import x\n")
    scripts = tmp_path / "tools"
    scripts.mkdir()
    (scripts / "one.py").write_text("from two import y\n")
    (scripts / "two.py").write_text("import pkg.c\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    modules = {_module_name(p): p for p in [*package.glob("*.py"), *scripts.glob("*.py")]}
    graph = {name: dict(_import_edges(path, modules)) for name, path in modules.items()}
    assert graph["pkg.a"] == {"pkg.b": 2}
    assert graph["pkg.c"] == {"pkg.d": 3}
    assert graph["tools.one"] == {"tools.two": 1}
    assert _cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.c", "pkg.d", "pkg.c"]]
