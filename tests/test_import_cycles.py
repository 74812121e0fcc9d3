"""No import cycle inside the tf2tosa package, counting every import the source holds.

The graph is built from the source with ``ast`` (nothing is imported): one node per module (``pkg/__init__.py`` is
``pkg``), an edge for every ``import`` / ``from … import`` statement anywhere in the file - at module level, inside
functions and methods (the lazy imports that hide a cycle from import-linter), under ``if TYPE_CHECKING:`` and in
``try`` blocks alike.  ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``;
relative imports are resolved against the importing module's package.  Importing ``a.b.c`` also runs ``a`` and
``a.b``, but those implicit parent-package edges are not counted: every module would then sit in a cycle with the
package's ``__init__`` (``tf2tosa/__init__.py`` imports the API).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tf2tosa"


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` under ``root`` (a package directory)."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = [root.name, *f.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module of the package, line) for each import statement of module ``name``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:  # `import a.b.c` of a name inside a module
                    target = target.rpartition(".")[0]
                if target:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    yield sub, node.lineno
                elif source in modules:
                    yield source, node.lineno


def import_graph(root: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """module → {module it imports: first line of such an import}, within the package at ``root``."""
    modules = _modules(root)
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for name, path in modules.items():
        for target, line in _imports(name, path, modules):
            if target != name:
                graph[name].setdefault(target, line)
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components with more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _one_cycle(graph: dict[str, dict[str, int]], comp: list[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first within the component)."""
    start, members = comp[0], set(comp)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for t in sorted(graph[node]):
                if t == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if t in members and t not in parent:
                    parent[t] = node
                    nxt.append(t)
        frontier = nxt
    raise AssertionError(f"no cycle in component {comp}")


def describe_cycles(graph: dict[str, dict[str, int]]) -> list[str]:
    """One line per cycle found: ``a (line) → b (line) → … → a``."""
    lines = []
    for comp in _strongly_connected(graph):
        cyc = _one_cycle(graph, comp)
        hops = [f"{a}:{graph[a][b]}" for a, b in zip(cyc, cyc[1:])]
        lines.append(" -> ".join([*hops, cyc[-1]]) + f"  ({len(comp)} modules in the component: {', '.join(comp)})")
    return lines


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 500  # the walk found the package
    cycles = describe_cycles(graph)
    assert not cycles, "import cycles (module:line of the import -> ...):\n" + "\n".join(cycles)


def test_cycle_finder_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    """The checker itself: a cycle closed by a function-level import, one closed under TYPE_CHECKING and one through
    ``from . import x`` are all reported; an acyclic package is not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import c\n")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import X\n")
    (pkg / "d.py").write_text("import pkg.c\n")
    (pkg / "sub" / "c.py").write_text("from .. import e\n")
    (pkg / "e.py").write_text("import pkg.sub\n")
    (pkg / "f.py").write_text("from .a import f\nimport os\n")
    cycles = describe_cycles(import_graph(pkg))
    assert len(cycles) == 3, cycles
    assert any(c.startswith("pkg.a:1 -> pkg.b:2 -> pkg.a") for c in cycles), cycles
    assert any(c.startswith("pkg.c:3 -> pkg.d:1 -> pkg.c") for c in cycles), cycles
    assert any("pkg.sub.c" in c and "pkg.e" in c for c in cycles), cycles
    (pkg / "b.py").write_text("def f():\n    pass\n")
    (pkg / "d.py").write_text("")
    (pkg / "e.py").write_text("")
    assert describe_cycles(import_graph(pkg)) == []
