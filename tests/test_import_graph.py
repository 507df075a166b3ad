"""No import circle in the package: the modules' imports form a graph without cycles.

An edge is an import of a `durable_graph` module by another (``import x``, ``from x import y``
where ``y`` may be a module), at any depth in the module — a function's deferred import counts,
an ``if TYPE_CHECKING:`` block does not (it never runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

import durable_graph

PACKAGE = Path(durable_graph.__file__).parent
MODULES = {
    ".".join(("durable_graph", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
        ".__init__"
    ): p
    for p in sorted(PACKAGE.rglob("*.py"))
}


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {name for name in found if name in MODULES and name != module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order), or None."""

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = {m: _imports(p, m) for m, p in MODULES.items()}
    # A package's __init__ re-exporting its modules is not a circle: a module importing its
    # package (to reach a sibling) is the edge that closes one, and it is counted.
    for module in graph:
        graph[module] = {
            d
            for d in graph[module]
            if not (module.startswith(d + ".") and MODULES[d].name == "__init__.py")
        }
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
