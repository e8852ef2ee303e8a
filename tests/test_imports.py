"""The package's modules import each other without a cycle: every import counts, a function's own included."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import provenance

PACKAGE = Path(provenance.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in it (at the top, in a function, in a branch).
    `from provenance.http import routes` imports the module routes; `from provenance.text import words` the
    module text."""
    modules = _modules()

    def module_of(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(module_of(a.name) for a in node.names if a.name.split(".")[0] == "provenance")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] == "provenance":
                    targets.update(module_of(f"{node.module}.{a.name}") for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                raise AssertionError(f"{name}: a relative import; the package imports absolutely")
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def test_the_graph_sees_imports_at_the_top_and_inside_functions() -> None:
    graph = import_graph()
    assert {"provenance.pipeline.door", "provenance.settings", "provenance.errors"} <= set(graph)
    assert "provenance.errors" in graph["provenance.settings"]  # at the top
    assert "provenance.profiles.anthropic" in graph["provenance.services"]  # inside build_profile
    assert "provenance.text" in graph["provenance.pipeline.answering"]  # `from provenance import text as T`
    assert "provenance.http.routes" in graph["provenance.app"]


def test_no_import_cycle() -> None:
    try:
        tuple(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
