"""The package's modules import each other without a cycle, and each layer only its own and lower layers' modules
(LAYERS): every import counts, a function's own included."""

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


# Which part of the package may import which, lowest first: a module may import its own layer's modules and
# any lower layer's, never a higher one's. A part is a top-level module or package (`provenance.store`
# covers `provenance.store.corpora`); a longer name overrides its package's layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    # The wire types and the ports, with what every layer uses: errors, text analysis, the stopwatch, logs.
    ("wire", "ports", "errors", "text", "timing", "logs"),
    # The configuration, read from the environment: it imports nothing that runs.
    ("settings",),
    # Words and shapes with no I/O: what refusals say, what the offline tools print, the eval case's schema
    # (what `provenance feedback export` writes), and documents read into passages (what the store keeps).
    # Who may read and write which corpus: the rules alone, and the corpus admin's wire types.
    (
        "pipeline.reasons",
        "report",
        "evaluation.cases",
        "ingest.documents",
        "ingest.chunking",
        "access",
        "access.clients",
        "access.wire",
    ),
    # Data access, the model runtimes and the web crawler (what the service reads from outside it); the access
    # and job tables.
    ("store", "inference", "sources", "access.store", "jobs", "jobs.queue"),
    # The guards, over their tables, and telling who a request comes from (a key is checked as they check it).
    ("guards", "access.identify"),
    # Follow-up questions: who may read which conversation, and the batched writer of its turns.
    ("conversations",),
    # Who decides a claim (the rule checks, the local verifiers, the model judge, whose verdict wins), and the
    # counters every part increments.
    ("claims", "metrics"),
    # The pipeline's stages and the model profiles that supply its ports; ingest writes through the store, and
    # the ingest worker runs it for the queue's jobs.
    ("stages", "profiles", "ingest", "jobs.sites", "jobs.worker"),
    # The request's path, which orders the stages.
    ("pipeline",),
    # What a running service holds, the feedback desk, and the HTTP layer at the top.
    ("feedback",),
    ("services",),
    ("http", "app"),
    # Outside the request path: the offline evaluation and the command line.
    ("evaluation",),
    ("cli", "__main__", "access.commands", "jobs.commands", "sources.commands"),
)


def _layer_of(module: str) -> int:
    name = module.removeprefix("provenance.")
    while name:
        for rank, parts in enumerate(LAYERS):
            if name in parts:
                return rank
        name = name.rpartition(".")[0]
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a higher layer's module, as "importer -> imported"."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if a != "provenance"
        for b in targets
        if b != "provenance" and _layer_of(b) > _layer_of(a)
    )


def test_each_layer_imports_only_its_own_and_lower_layers() -> None:
    upward = upward_imports(import_graph())
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_the_layer_rule_fails_on_a_violation() -> None:
    # wire and ports at the bottom; stages above store and inference; http at the top.
    assert upward_imports({"provenance.wire": {"provenance.pipeline.door"}}) == [
        "provenance.wire -> provenance.pipeline.door"
    ]
    assert upward_imports({"provenance.store.corpora": {"provenance.stages.retrieve"}})
    assert upward_imports({"provenance.inference.embedder": {"provenance.pipeline.answering"}})
    assert upward_imports({"provenance.pipeline.door": {"provenance.http.routes"}})
    assert upward_imports({"provenance.settings": {"provenance.inference.streamed_calls"}})
    assert not upward_imports({"provenance.stages.retrieve": {"provenance.store.corpora", "provenance.wire"}})
    assert not upward_imports({"provenance.http.routes": {"provenance.pipeline.door"}})


def test_the_request_path_never_imports_evaluation_and_feedback_only_its_cases() -> None:
    graph = import_graph()
    offline = {m for m in graph if m.startswith("provenance.evaluation")}
    importers = {a: targets & offline for a, targets in graph.items() if targets & offline and a not in offline}
    assert {a for a in importers if not a.startswith("provenance.cli.")} <= {"provenance.feedback.cases"}, importers
    assert importers.get("provenance.feedback.cases", set()) <= {"provenance.evaluation.cases"}
    for module, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        assert "import bench" not in text and "from bench" not in text, module
        assert "from evals" not in text and "import evals" not in text, module
