"""The pipeline's packages depend one way: no package imports one that imports it back."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.conftest import ROOT


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _package_imports() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for path in (ROOT / "diagnose").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        source = _package(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if name.startswith("diagnose.") and _package(name) != source:
                    edges[source].add(_package(name))
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle in the graph, as the packages along it, or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target] if target in path else [node, target]
            if target not in state and (found := visit(target, [*path, target])):
                return found
        state[node] = "done"
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_no_package_imports_one_that_imports_it_back():
    edges = _package_imports()
    assert edges["diagnose.dump"], "the import graph was not read"
    assert _cycle(edges) is None, " -> ".join(_cycle(edges))


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


def test_no_module_runs_past_500_lines_without_saying_why():
    """A long module is split by responsibility, or its docstring says why it is one ("Over 500 lines")."""
    long = []
    for folder in ("diagnose", "collectors", "testbed", "fixtures", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") > 500 and "Over 500 lines" not in (ast.get_docstring(ast.parse(text)) or ""):
                long.append(str(path.relative_to(ROOT)))
    assert not long, f"over 500 lines, with no word on why: {', '.join(sorted(long))}"
