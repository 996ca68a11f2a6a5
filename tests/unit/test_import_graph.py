"""The layering is true: no import cycle in src/tabsafe, between modules or between folders.

The graph is read from the source (ast), not from a running interpreter: every ``import`` and
``from … import`` inside tabsafe counts, at module level and inside functions alike (an import
inside a function only postpones a cycle), except those under ``if TYPE_CHECKING:`` (never run:
annotations only). ``from pkg import name`` counts as importing ``pkg.name`` when that is a
module, else ``pkg`` itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _modules(src: Path) -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted((src / "tabsafe").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    # a compiled extension is a module too (its C source; it imports no tabsafe module)
    for path in sorted((src / "tabsafe").rglob("*.c")):
        out[".".join(path.relative_to(src).with_suffix("").parts)] = (path, False)
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


@cache
def _graph(src: Path) -> dict[str, frozenset[str]]:
    return {m: frozenset(t) for m, t in _read_graph(src).items()}


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module → the tabsafe modules it imports (a fresh copy of the graph read once per folder)."""
    return {m: set(t) for m, t in _graph(src).items()}


def _read_graph(src: Path) -> dict[str, set[str]]:
    modules = _modules(src)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, (path, package) in modules.items():
        if path.suffix != ".py":
            continue
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if package else name.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules else prefix for a in node.names]
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return out


def folders(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The same graph between tabsafe's folders (``tabsafe.protect``…) and top-level modules."""
    def folder(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 or (SRC / "tabsafe" / parts[-1]).is_dir() else m

    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        out.setdefault(folder(a), set()).update(folder(b) for b in targets if folder(b) != folder(a))
    return out


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(import_graph()) == []


def test_no_folder_imports_itself_through_others() -> None:
    assert cycles(folders(import_graph())) == []


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The check bites: a cycle through a function-level import, a relative import or a
    ``from package import module`` is found; one through ``if TYPE_CHECKING:`` is not."""
    pkg = tmp_path / "tabsafe"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from tabsafe.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from .. import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tabsafe import d\n")
    (pkg / "d.py").write_text("import tabsafe.c\n")
    assert cycles(import_graph(tmp_path)) == [["tabsafe.a", "tabsafe.sub.b"]]


@pytest.mark.parametrize("edge", [("tabsafe.model.filter", "tabsafe.engines.duckdb")])
def test_a_new_back_edge_would_be_caught(edge: tuple[str, str]) -> None:
    graph = import_graph()
    graph[edge[0]].add(edge[1])
    assert cycles(graph)


# --------------------------------------------------------------------------------- what ARCHITECTURE.md says


def _folder_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else module


def _reaches(graph: Mapping[str, set[str]], folder: str) -> set[str]:
    """The folders that modules of ``folder`` import directly."""
    return {_folder_of(t) for m, targets in graph.items() if _folder_of(m) == folder for t in targets} - {folder}


@pytest.mark.parametrize(("folder", "never"), [
    ("model", {"engines", "method", "protect", "risk", "release", "evaluate", "service", "cli", "registry",
               "pipeline", "tabulation", "io", "solver"}),
    ("protect", {"engines", "release", "evaluate", "service", "cli", "pipeline"}),
    ("engines", {"method", "protect", "risk", "release", "evaluate", "service", "cli", "registry", "pipeline"}),
    ("service", {"protect", "risk", "release", "evaluate", "cli"}),
    ("risk", {"protect", "release", "evaluate", "service", "cli", "pipeline", "method"}),
])
def test_a_layer_imports_nothing_above_it(folder: str, never: set[str]) -> None:
    """docs/ARCHITECTURE.md: model/ imports no engine and no method; protect/ no engine; the service
    knows methods by name only (the registry); engines know no method."""
    assert _reaches(import_graph(), folder) & never == set()


def test_engine_names_only_in_engines() -> None:
    """docs/ARCHITECTURE.md: no module outside engines/ names an engine (``"duckdb"``, ``"spark"``
    as a string); engines declare what they can do instead."""
    import re

    named = re.compile(r"""["'](duckdb|spark)["']""")
    found = [str(p.relative_to(SRC)) for p in (SRC / "tabsafe").rglob("*.py")
             if "engines" not in p.relative_to(SRC / "tabsafe").parts and named.search(p.read_text(encoding="utf-8"))]
    assert found == []
