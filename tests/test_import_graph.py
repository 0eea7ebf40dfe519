"""optbench's modules import each other without a cycle, and no two of its packages import each other, lazy
(function-level) imports included.

A cycle works or breaks depending on which module happens to be imported first; this test reads every
``import`` statement of the installed packages (optbench, optbench.kernels, optbench.reference) and fails
naming the cycle. ``from pkg import name`` depends on ``pkg`` (its ``__init__`` runs, and holds ``name``
unless that is a submodule) and on ``pkg.name`` when that is a module.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"optbench": ROOT / "optbench", "optbench.kernels": ROOT / "kernels",
            "optbench.reference": ROOT / "reference"}


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The optbench modules ``name`` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            out.add(base)  # the package runs first, and a name is looked up in it
            out.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in out if m in known and m != name}


@functools.cache  # the files are read once per session: the tests only read the graph
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
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
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    edges = graph()
    assert "optbench.engine.planner" in edges and "optbench.checks" in edges["optbench.engine.planner"]
    # ``from . import adam``
    assert edges["optbench.reference.adamw"] == {"optbench.reference", "optbench.reference.adam"}


def test_the_detector_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    found = cycles(graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def package(module: str) -> str:
    """The package a module belongs to (``optbench.engine.runner`` -> ``optbench.engine``); a top-level module
    (``optbench.results``) and the ``optbench`` package's own ``__init__`` are their own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def two_way(edges: dict[str, set[str]]) -> list[str]:
    """Every pair of packages that import each other, either way round, each with the imports that make it."""
    between: dict[tuple[str, str], list[str]] = {}
    for m, deps in edges.items():
        for d in deps:
            if package(m) != package(d):
                between.setdefault((package(m), package(d)), []).append(f"{m} -> {d}")
    return [f"{a} <-> {b}: " + ", ".join(between[a, b] + between[b, a])
            for a, b in sorted(between) if a < b and (b, a) in between]


def test_the_two_way_detector_names_the_imports():
    edges = {"optbench.a.x": {"optbench.b.y"}, "optbench.b.y": set(), "optbench.b.z": {"optbench.a.w"},
             "optbench.a.w": set(), "optbench.c": {"optbench.a.x"}}
    assert two_way(edges) == ["optbench.a <-> optbench.b: optbench.a.x -> optbench.b.y, optbench.b.z -> optbench.a.w"]


def test_no_two_packages_import_each_other():
    """Dependencies between packages point one way (lazy imports included): suite -> cases -> (reference |
    implementation) -> checks -> results -> report reads in one direction, and a package can be understood without
    the ones above it."""
    found = two_way(graph())
    assert not found, "packages that import each other:\n" + "\n".join(found)


@pytest.mark.parametrize("lower, upper", [
    ("optbench.results", "optbench.report"), ("optbench.perf", "optbench.report"),
    ("optbench.engine.history", "optbench.report"),
    ("optbench.checks", "optbench.engine"), ("optbench.checks", "optbench.cli"), ("optbench.engine", "optbench.cli"),
    ("optbench.gate", "optbench.cli"), ("optbench.kernels", "optbench.implementations"),
])
def test_dependencies_point_down(lower, upper):
    """Lower layers never import upper ones: the data flow reads one way."""
    edges = graph()
    wrong = sorted(f"{m} -> {d}" for m, deps in edges.items() if m == lower or m.startswith(lower + ".")
                   for d in deps if d == upper or d.startswith(upper + "."))
    assert not wrong, wrong
