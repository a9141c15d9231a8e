"""The walk of ``Sagacity.reject`` (``scripts/walk.py``): how many modules one saga id passes
through while a pending gate is rejected and the saga compensated. Issue #20 brought it from 15
modules to 13; a change that adds a module to that path fails here and says which."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

WALK = Path(__file__).resolve().parents[2] / "scripts" / "walk.py"

#: The modules on the path today (scripts/walk.py prints them).
PATH = [
    "sagacity._sagacity",
    "sagacity._approvals",
    "sagacity._engine",
    "sagacity._state",
    "sagacity._journal",
    "sagacity._json",
    "sagacity.stores._sql",
    "sagacity.model",
    "sagacity._compensation",
    "sagacity.chain",
    "sagacity.stores.sqlite",
    "sagacity.stores._lease",
    "sagacity.stores._group",
]


def _walk() -> ModuleType:
    spec = importlib.util.spec_from_file_location("walk", WALK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reject_passes_through_no_more_modules_than_it_did() -> None:
    found = _walk().measure()
    assert found["status"] == "REJECTED"
    added = [m for m in found["path"] if m not in PATH]
    assert added == [], f"Sagacity.reject now also passes the saga id through {added}"
    assert found["climbs_back"] <= 3, found["climbs"]
