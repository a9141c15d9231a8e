"""Each integration page's Python example runs as written, offline, on a fresh SQLite journal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sagacity.tools import registry

DOCS = Path(__file__).parent.parent.parent / "docs" / "integrations"
PAGES = {
    "pydantic-ai.md": "pydantic_ai",
    "langchain.md": "langchain",
    "openai-agents.md": "agents",
    "strands.md": "strands.agent",
    "agent-framework.md": "agent_framework",
}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_integration_example_runs(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's complete example (its last python block) runs without network or key."""
    pytest.importorskip(PAGES[page], reason=f"the extra for {page} is not installed")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), flags=re.DOTALL)
    example = blocks[-1]
    with registry.isolated():
        for name in registry.names():  # the page declares its own tools under the usual names
            registry.unregister(name)
        exec(compile(example, page, "exec"), {"__name__": "docs_example"})
    assert (tmp_path / "sagacity.db").exists()
