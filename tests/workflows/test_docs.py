"""docs/workflows.md's Python blocks run as written, in order, on a fresh SQLite journal."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagacity.tools import registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"


def test_every_python_block_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc_namespace: Callable[[str], dict[str, Any]]
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) >= 3
    namespace = doc_namespace("workflows_doc")
    with registry.isolated():
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)
    assert (tmp_path / "workflows.db").exists()


def test_the_journaled_gate_input_shown_is_what_the_library_writes(tmp_path: Path) -> None:
    """The JSON object the page shows is byte for byte the gate's journaled input."""
    from sagacity import Sagacity

    shown = re.search(r"```json\n(.*?)\n```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert shown is not None
    namespace: dict[str, object] = {"__name__": "workflows_doc"}
    block = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)[0]
    with registry.isolated(), Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        exec(compile(block, str(DOC), "exec"), namespace)
        result = namespace["publishing"].run(sg, "r", {"topic": "sagas for agents"})  # type: ignore[attr-defined]
        [request] = result.awaiting
        assert request.input == shown.group(1)
