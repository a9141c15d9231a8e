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


#: The shells: each reads and drives the library through its public API only.
SHELLS = ("server", "cli", "mcp", "integrations")

#: The read side and the runtime: the first modules a shell would reach for to parse the journal
#: or drive a saga itself (named in the failure, as the worst of the private imports).
NEVER = {
    f"sagacity.{m}"
    for m in (
        "_view",
        "_reads",
        "_engine",
        "_journal",
        "_index",
        "_compensation",
        "_saga",
        "_keyed",
        "_sagacity",
        "_effects",
        "_traced",
        "_context",
    )
}


def _all_imports(path: Path) -> set[str]:
    """Every package module ``path`` imports, anywhere (functions and TYPE_CHECKING included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sagacity"):
            if node.module == "sagacity":
                found.update(f"sagacity.{a.name}" for a in node.names if not a.name.startswith("__"))
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sagacity"))
    return found


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def shell_imports() -> dict[tuple[str, str], str]:
    """(shell file, private module it imports) for every shell file, outside its own shell."""
    found = {}
    for shell in SHELLS:
        for path in sorted((PACKAGE / shell).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            for module in _all_imports(path):
                if module.split(".")[1] == shell or module == "sagacity._wire":
                    continue  # its own modules; the one serializer every surface shares
                if _private(module):
                    found[(rel, module)] = module
    return found


def test_shells_import_only_the_public_package_and_wire() -> None:
    """``server``, ``cli``, ``mcp`` and ``integrations`` read and drive the library through the
    public package (``sagacity``, its public submodules) and ``_wire``: a shell that parses the
    journal itself, or reaches into the runtime, fails here."""
    found = shell_imports()
    never = sorted(pair for pair in found if pair[1] in NEVER)
    assert never == [], f"shells import the read side or the runtime: {never}"
    assert sorted(found) == [], (
        f"shells import private modules (use the public API or _wire): {sorted(found)}"
    )


def test_the_shell_rule_catches_a_private_import(tmp_path: Path) -> None:
    """The rule's reader sees an import of ``sagacity._state`` wherever a shell makes it."""
    source = tmp_path / "shell.py"
    source.write_text(
        "from sagacity import Sagacity\n"
        "def f():\n    from sagacity._state import fold\n"
        "if True:\n    import sagacity._view\n",
        encoding="utf-8",
    )
    assert {m for m in _all_imports(source) if _private(m)} == {"sagacity._state", "sagacity._view"}
