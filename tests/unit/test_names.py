"""One meaning, one name: no two modules of the package define a public class of the same name.

``sagacity.Finding`` (the doctor's), ``sagacity.checkpoints.Finding`` and
``sagacity.guardrails.Finding`` were three different classes under one name (issue #34); so were
the two ``Policy`` classes and the two ``Guard``\\ s. Each meaning has its own name now, and the
old public names stay as aliases of the new ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sagacity
from sagacity import checkpoints, doctor, guardrails, model

PACKAGE = Path(sagacity.__file__).parent


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).endswith("Protocol") for base in node.bases)


def classes_in(path: Path) -> list[str]:
    """The public classes ``path`` defines at top level. A ``Protocol`` is left out: it describes
    its implementation under the same name (``_context.SagaRun`` is the shape ``_saga.SagaRun``
    has), one meaning."""
    return [
        node.name
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and not _is_protocol(node)
    ]


def public_classes() -> dict[str, list[str]]:
    """Each public class name -> the modules defining it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in classes_in(path):
            found.setdefault(name, []).append(path.relative_to(PACKAGE).as_posix())
    return found


def test_no_public_class_name_is_defined_by_two_modules() -> None:
    twice = {name: modules for name, modules in public_classes().items() if len(modules) > 1}
    assert twice == {}, f"one name, several classes (give each meaning its own name): {twice}"


def test_the_reader_sees_a_class_defined_twice(tmp_path: Path) -> None:
    """The rule's reader: top-level classes count, a Protocol and a private class do not."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import Protocol\n"
        "class Finding: ...\nclass Run(Protocol): ...\nclass _Parser: ...\n"
        "def f():\n    class Inner: ...\n",
        encoding="utf-8",
    )
    assert classes_in(source) == ["Finding"]


def test_the_old_names_are_aliases_of_the_new_ones() -> None:
    """Code written against the old names keeps working, and gets the same classes."""
    assert checkpoints.Finding is checkpoints.CheckpointFinding
    assert checkpoints.FindingKind is checkpoints.CheckpointFindingKind
    assert guardrails.Finding is guardrails.RuleFinding
    assert sagacity.Finding is doctor.Finding
    assert sagacity.FindingKind is model.FindingKind
    assert {"CheckpointFinding", "CheckpointFindingKind"} <= set(checkpoints.__all__)
    assert "RuleFinding" in guardrails.__all__
    distinct = {sagacity.Finding, checkpoints.CheckpointFinding, guardrails.RuleFinding}
    assert len(distinct) == 3


def test_the_gateway_policy_has_its_own_name() -> None:
    mcp = pytest.importorskip("sagacity.mcp")
    assert mcp.Policy is mcp.GatewayPolicy
    assert "GatewayPolicy" in mcp.__all__
    assert mcp.GatewayPolicy is not guardrails.Policy
    assert mcp.parse_policy("").__class__ is mcp.GatewayPolicy
    # its readers are named for it too; the guardrails' load_policy/parse_policy read another file
    assert (mcp.load_policy, mcp.parse_policy) == (mcp.load_gateway_policy, mcp.parse_gateway_policy)
    assert mcp.parse_gateway_policy("").__class__ is mcp.GatewayPolicy
    assert guardrails.parse_policy("").__class__ is guardrails.Policy
