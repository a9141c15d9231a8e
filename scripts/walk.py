"""How far one saga id travels through the library while ``Sagacity.reject`` runs (issue #20).

A saga with one compensable step and a pending approval gate, on a SQLite journal, is rejected
under a profiler. The *walk* is every package function entered with the saga id in its
arguments (the id itself, or a value whose ``saga_id`` is it): the modules it visits, and its
*climbs back*: distinct calls from one module into a module that imports it (directly or not),
so control returns up into a layer it had already gone below (a callback, a re-entry).

    python scripts/walk.py            # modules, climbs back, the path
    python scripts/walk.py --json     # the same, for a script

Counts, not times: the numbers change only when the code's shape does.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import sagacity
from sagacity import CompensationContext, Reversibility, Sagacity, tool
from sagacity.tools import ToolRegistry

SAGA = "walk-saga"
PACKAGE = Path(sagacity.__file__).parent

tools = ToolRegistry()


@tool(registry=tools)
def reserve(sku: str) -> str:
    return f"reservation {sku}"


@reserve.compensation
def release(ctx: CompensationContext) -> None:
    pass


@tool(registry=tools, reversibility=Reversibility.IRREVERSIBLE)
def wire(amount: str) -> str:
    return f"wire {amount}"


def _order() -> None:
    reserve("SKU-1")
    wire("10.00")


def _module_names() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``path`` imports when it runs (``if TYPE_CHECKING:`` left out; the
    package loads its names lazily, so ``from sagacity import X`` counts the module X is in)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if node.module == "sagacity":
                names += [sagacity._WHERE.get(a.name, "") for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found.update(n for n in names if n in modules and n != "sagacity")
    return found


def _above() -> dict[str, set[str]]:
    """For each module, the modules that import it, directly or through others."""
    modules = _module_names()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    importers: dict[str, set[str]] = {name: set() for name in modules}
    for name in modules:
        stack, seen = list(graph[name]), set()
        while stack:
            below = stack.pop()
            if below not in seen:
                seen.add(below)
                importers[below].add(name)
                stack.extend(graph[below])
    return importers


def _carries(frame: FrameType) -> bool:
    for value in frame.f_locals.values():
        if isinstance(value, str):
            if value == SAGA:
                return True
        elif getattr(value, "saga_id", None) == SAGA:
            return True
    return False


def _calls(sg: Sagacity, seq: int) -> Iterator[tuple[str | None, str, str]]:
    """(caller's module, module, function) for each call of the walk, in order."""
    stack: list[tuple[FrameType, str]] = []
    calls: list[tuple[str | None, str, str]] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("sagacity.") and _carries(frame):
                calls.append((stack[-1][1] if stack else None, module, frame.f_code.co_qualname))
                stack.append((frame, module))
        elif event == "return" and stack and stack[-1][0] is frame:
            stack.pop()

    sys.setprofile(profile)
    try:
        sg.reject(SAGA, seq, "alice", "the order was cancelled")
    finally:
        sys.setprofile(None)
    return iter(calls)


def measure() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, Sagacity(f"sqlite:///{tmp}/walk.db", registry=tools) as sg:
        sg.run(SAGA, _order)
        seq = sg.pending_approvals(SAGA)[0].journal_seq
        calls = list(_calls(sg, seq))
        status = str(sg.status(SAGA))
    above = _above()
    modules = list(dict.fromkeys(module for _, module, _ in calls))
    climbs = sorted(
        {(a, b) for a, b, _ in calls if a is not None and a != b and b in above[a]},
        key=lambda edge: (modules.index(edge[0]), modules.index(edge[1])),
    )
    return {
        "status": status,
        "modules": len(modules),
        "climbs_back": len(climbs),
        "path": modules,
        "climbs": [f"{a} -> {b}" for a, b in climbs],
        "calls": len(calls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON")
    args = parser.parse_args()
    found = measure()
    if args.json:
        print(json.dumps(found, indent=2))
        return
    counts = f"{found['modules']} modules, {found['climbs_back']} climbs back, {found['calls']} calls"
    print(f"Sagacity.reject ({found['status']}): {counts}")
    print("  " + " > ".join(m.removeprefix("sagacity.") for m in found["path"]))
    for climb in found["climbs"]:
        print(f"  climbs back: {climb}")


if __name__ == "__main__":
    main()
