"""Each integration page's Python example runs as written, offline, on a fresh SQLite journal."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagacity.tools import registry

DOCS = Path(__file__).parent.parent.parent / "docs" / "integrations"
# The module each page needs (crewai.flow, not crewai: tests/integrations/crewai would pass for it).
PAGES = {
    "pydantic-ai.md": "pydantic_ai",
    "langchain.md": "langchain",
    "openai-agents.md": "agents",
    "strands.md": "strands.agent",
    "agent-framework.md": "agent_framework",
    "crewai.md": "crewai.flow",
    "google-adk.md": "google.adk",
}


@pytest.mark.parametrize("page", sorted(PAGES))
@pytest.mark.filterwarnings("ignore:function_calling_llm is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:deprecated$:DeprecationWarning")  # CrewAI reads its own deprecated fields
@pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")  # CrewAI's own import
def test_integration_example_runs(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc_namespace: Callable[[str], dict[str, Any]]
) -> None:
    """The page's complete example (its last python block) runs without network or key."""
    pytest.importorskip(PAGES[page], reason=f"the extra for {page} is not installed")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), flags=re.DOTALL)
    example = blocks[-1]
    with registry.isolated():
        for name in registry.names():  # the page declares its own tools under the usual names
            registry.unregister(name)
        exec(compile(example, page, "exec"), doc_namespace("docs_example"))
    assert (tmp_path / "sagacity.db").exists()
