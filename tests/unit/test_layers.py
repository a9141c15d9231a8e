"""The runtime's modules import each other in one direction only: no cycles, nothing below the
facade imports it (DESIGN: engine -> compensation -> approvals/recovery -> saga -> facade)."""

from __future__ import annotations

import ast
from pathlib import Path

import sagacity

PACKAGE = Path(sagacity.__file__).parent


def _runtime_imports(path: Path) -> set[str]:
    """Package modules ``path`` imports when it runs (not under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sagacity"):
                if node.module == "sagacity":
                    found.update(f"sagacity.{a.name}" for a in node.names)
                else:
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("sagacity"))
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    visit([n for n in inner if isinstance(n, ast.stmt)])

    visit(tree.body)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {f"sagacity.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return {name: {m for m in _runtime_imports(path) if m in modules} for name, path in modules.items()}


def test_top_level_modules_import_without_cycles() -> None:
    """Following imports from any top-level module never comes back to it."""
    graph = _graph()
    for start in graph:
        stack, seen = list(graph[start]), set()
        while stack:
            module = stack.pop()
            assert module != start, f"import cycle through {start}"
            if module not in seen:
                seen.add(module)
                stack.extend(graph[module])


def test_only_surfaces_import_the_facade() -> None:
    """The runtime below the facade never reaches up to it."""
    runtime = {
        "_engine",
        "_approvals",
        "_compensation",
        "_recovery",
        "_saga",
        "_context",
        "_effects",
        "_telemetry",
        "_traced",
        "tools",
    }
    graph = _graph()
    for name in runtime:
        assert "sagacity._sagacity" not in graph[f"sagacity.{name}"], name


def test_telemetry_sits_below_the_runtime() -> None:
    """``_telemetry`` is called from the journal and the stores, so it imports none of the
    runtime; only ``_traced`` (the traced run) knows both."""
    graph = _graph()
    runtime = {
        f"sagacity.{m}" for m in ("_engine", "_approvals", "_compensation", "_recovery", "_saga", "_journal")
    }
    assert not graph["sagacity._telemetry"] & runtime
    assert "sagacity._traced" not in graph["sagacity._saga"]
