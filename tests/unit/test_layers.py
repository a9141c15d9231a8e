"""The package's modules import each other in one direction only, from the ground up.

The first tests follow run-time imports among the top-level modules; the layer tests below read
every import (type-only and function-local too) against the layer table ``LAYERS``, with today's
exceptions pinned in ``ALLOWED``, a list that can only shrink (docs/architecture.md draws it)."""

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


#: Private modules every shell may import: the one serializer (``_wire``) and the formats of
#: approval messages (``_links``: the notifier writes them, the server reads them back).
SHARED = frozenset({"sagacity._wire", "sagacity._links"})

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
                if module.split(".")[1] == shell or module in SHARED:
                    continue  # its own modules; the formats every surface shares
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


# The layers, from the ground up. Every import counts here (type-only, function-local, relative),
# read as ``/work/shared/tools/layers.py`` reads it: ``from sagacity import chain`` passes through
# the package root, so it is an import of the root as well as of ``sagacity.chain``.

#: Each part (a top-level module, or a subpackage as one part) imports parts of its own layer or
#: below only. ``""`` is the package root: the face that hands the facade's names on, so it sits
#: with the facade; below it, importing the root is importing upward.
LAYERS: dict[int, tuple[str, ...]] = {
    1: (  # the ground: pure base, imports nothing above it
        "_version",
        "errors",
        "chain",
        "_json",
        "_paging",
        "_effects",
        "model",
        "_payloads",
        "_state",
        "_context",
        "checks",
        "_toml_lines",
        "tools",
        "_otel_instruments",
        "_otel_gauges",
        "_telemetry",
        "_otel_hooks",
        "export",
        "verify_bundle",
        "_links",
        "links",
    ),
    2: ("stores",),  # the store contract and the stores
    3: ("_journal", "_index", "_queue", "_engine", "_otel_spans", "_otel_operations"),  # the journal level
    4: ("checkpoints", "guardrails"),
    5: (
        "_compensation",
        "_view",
        "_approvals",
        "_recovery",
        "_reconcile",
        "_audit",
        "_keyed",
        "doctor",
        "_saga",
        "_traced",
    ),
    6: ("_sagacity", "_twins", "", "framework", "otel", "testing"),  # the facade and what wraps it
    7: ("workflows", "integrations", "_wire", "mcp", "server", "notify", "cli"),  # the surfaces
}

#: Imports that break the rules today, each with why it is still there. The list only shrinks: an
#: import not on it that goes upward, into its own package's face, or around a loop fails; so does
#: an entry whose import is gone or no longer breaks a rule.
#: Imports that break a rule and are let through, each with why (empty since #34: keep it so;
#: an entry must name its reason, and one whose import is gone fails the test).
ALLOWED: dict[tuple[str, str], str] = {}


def _layer_of() -> dict[str, int]:
    return {f"sagacity.{p}" if p else "sagacity": n for n, parts in LAYERS.items() for p in parts}


def _module_names() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(path: Path, module: str) -> set[str]:
    """Every dotted name ``path`` (module ``module``) imports: ``import a.b`` gives ``a.b``;
    ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module); relative names resolved."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            found.add(stem)
            found.update(f"{stem}.{a.name}" for a in node.names)
    return found


def module_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (a name that is not a module: its nearest module)."""
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(path, module):
            if name != "sagacity" and not name.startswith("sagacity."):
                continue
            target = name
            while target not in modules:
                target = target.rpartition(".")[0]
            if target != module:
                targets.add(target)
        graph[module] = targets
    return graph


def part_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def part_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        parts.setdefault(part_of(module), set()).update(part_of(t) for t in targets)
    return {part: targets - {part} for part, targets in parts.items()}


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def without(graph: dict[str, set[str]], edges: set[tuple[str, str]]) -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in edges} for a, targets in graph.items()}


def broken_rules(graph: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    """Each import that goes up a layer or into the importer's own package face, and why."""
    layer = _layer_of()
    found = {}
    for a, targets in graph.items():
        for b in targets:
            if layer.get(part_of(a), 0) < layer.get(part_of(b), 0):
                found[(a, b)] = f"layer {layer[part_of(a)]} imports layer {layer[part_of(b)]}"
            elif b != "sagacity" and a.startswith(f"{b}."):  # the root is placed in LAYERS
                found[(a, b)] = "imports its own package's face"
    return found


def _on_a_loop(graph: dict[str, set[str]], a: str, b: str) -> bool:
    """Whether ``b`` leads back to ``a``, i.e. the import ``a -> b`` closes a loop."""
    stack, seen = [b], set()
    while stack:
        node = stack.pop()
        if node == a:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(graph.get(node, ()))
    return False


def test_every_part_has_one_layer() -> None:
    """A new module or subpackage is placed in the table before it can be imported."""
    placed = [p for parts in LAYERS.values() for p in parts]
    assert len(placed) == len(set(placed)), "a part is in two layers"
    unplaced = sorted({part_of(m) for m in module_graph()} - set(_layer_of()))
    assert unplaced == [], f"place these in LAYERS: {unplaced}"


def test_no_import_goes_up_or_into_its_own_face_beyond_the_allow_list() -> None:
    """Each layer imports its own layer or below; a module never imports its own package's
    ``__init__`` (a face hands names on; it is not a dependency)."""
    new = sorted(set(broken_rules(module_graph())) - set(ALLOWED))
    found = broken_rules(module_graph())
    assert new == [], "imports against the layers: " + "; ".join(
        f"{a} -> {b} ({found[(a, b)]})" for a, b in new
    )


def test_no_import_loop_beyond_the_allow_list() -> None:
    """Without the listed imports, no module leads back to itself, nor any part to itself."""
    rest = without(module_graph(), set(ALLOWED))
    assert loops(rest) == [], f"module import loops: {loops(rest)}"
    assert loops(part_graph(rest)) == [], f"import loops among parts: {loops(part_graph(rest))}"


def test_the_allow_list_only_shrinks() -> None:
    """An entry whose import is gone, or no longer goes up, into a face or around a loop, is
    deleted: the list records what is left to fix, nothing else."""
    graph = module_graph()
    parts = part_graph(graph)
    rules = broken_rules(graph)
    stale = sorted(
        (a, b)
        for a, b in ALLOWED
        if b not in graph.get(a, set())
        or not ((a, b) in rules or _on_a_loop(graph, a, b) or _on_a_loop(parts, part_of(a), part_of(b)))
    )
    assert stale == [], f"fixed: delete these from ALLOWED: {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Type-only, function-local and relative imports all count; ``from sagacity import chain``
    passes through the root."""
    source = tmp_path / "_probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from sagacity import chain\n"
        "if TYPE_CHECKING:\n    from sagacity._engine import Engine\n"
        "def f():\n    import sagacity.stores.base\n"
        "from . import _json\nfrom .stores import _url\n",
        encoding="utf-8",
    )
    names = {n for n in imported_names(source, "sagacity._probe") if n.startswith("sagacity")}
    assert names == {
        "sagacity",
        "sagacity.chain",
        "sagacity._engine",
        "sagacity._engine.Engine",
        "sagacity.stores.base",
        "sagacity._json",
        "sagacity.stores",
        "sagacity.stores._url",
    }


def test_the_contributor_docs_draw_this_table() -> None:
    """docs/architecture.md's picture lists the same parts in the same layers as ``LAYERS``."""
    page = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawn = {}
    for line in page.splitlines():
        label, bar, parts = line.partition("│")
        if bar and label.split() and label.split()[0].isdigit():
            names = (p.removesuffix("/") for p in parts.split())
            drawn[int(label.split()[0])] = tuple("" if n == "(root)" else n for n in names)
    assert drawn == LAYERS
