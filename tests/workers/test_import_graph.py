"""The worker's modules import each other in one direction only, and the shared data-plane
package stands below both sides.

Every ``import`` statement counts, wherever it is (inside a function, under
``if TYPE_CHECKING:``): a circle that only type checkers see is still a circle for a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests import ROOT


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (relative imports are not used in this project)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def package_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    modules = {
        f"{package}.{path.stem}": path
        for path in sorted((ROOT / package).glob("*.py"))
        if path.stem != "__init__"
    }
    return {
        name: {other for other in imported_modules(path) if other in modules and other != name}
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_circle_through_type_checking_imports(tmp_path):
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from workers.b import B\n"
    (tmp_path / "a.py").write_text(source)
    assert imported_modules(tmp_path / "a.py") >= {"workers.b"}
    graph = {"workers.a": {"workers.b"}, "workers.b": {"workers.c"}, "workers.c": {"workers.a"}}
    assert find_cycle(graph) == ["workers.a", "workers.b", "workers.c", "workers.a"]
    assert find_cycle({"workers.a": {"workers.b"}, "workers.b": set()}) is None


def test_no_import_circle_in_workers():
    graph = package_graph("workers")
    assert "workers.worker" in graph and "workers.dispatcher" in graph
    assert find_cycle(graph) is None


def test_parts_do_not_reach_up_to_the_worker():
    graph = package_graph("workers")
    composition = {"workers.worker", "workers.main", "workers.http"}
    for name, imports in graph.items():
        if name not in composition:
            assert "workers.worker" not in imports, name


def test_the_shared_data_plane_imports_neither_side():
    for path in sorted((ROOT / "dataplane").glob("*.py")):
        for module in imported_modules(path):
            # The wire protocol is shared by everything; the client itself is not.
            if module == "sluice.protocol" or module.startswith("sluice.protocol."):
                continue
            assert module.split(".")[0] not in {"api", "workers", "sluice"}, (path.name, module)
