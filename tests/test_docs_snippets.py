"""Every Python snippet in docs/ runs as written (#25): a page's blocks, in order,
as one script (a reader goes top to bottom), in a fresh directory, in a fresh interpreter.

Pages are found by glob, so a new page or block is checked without touching this file. A page
whose optional extra is not installed is skipped, naming the extra.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The README's example is run by tests/test_readme.py (twice, as a script).
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "```python\n" in p.read_text("utf-8"))
#: The module a page's snippets need beyond the core, and the extra that installs it.
NEEDS = {
    "langchain.md": ("langchain", "sagacity[langchain]"),
    "openai-agents.md": ("agents", "sagacity[openai-agents]"),
    "google-adk.md": ("google.adk", "sagacity[google-adk]"),
    "pydantic-ai.md": ("pydantic_ai", "sagacity[pydantic-ai]"),
    "strands.md": ("strands.agent", "sagacity[strands]"),
    "agent-framework.md": ("agent_framework", "sagacity[agent-framework]"),
    "crewai.md": ("crewai.flow", "sagacity[crewai]"),  # crewai.flow: tests/integrations/crewai is no stand-in
    "observability.md": ("opentelemetry.sdk", "sagacity[otel] and opentelemetry-sdk"),
    "mcp.md": ("mcp", "sagacity[mcp]"),
    "checkpoints.md": ("cryptography", "sagacity[signing]"),
    "notifications.md": ("standardwebhooks", "sagacity[notify]"),
    "approvals-from-messages.md": ("jwt", "sagacity[messages]"),
}


#: Files a page's snippets open, written from the page's own blocks: (file name, language, which
#: block of that language). The page shows the file; the snippet reads it by that name.
FILES = {"policies.md": [("payments.toml", "toml", 0)], "notifications.md": [("notify.toml", "toml", 0)]}


def blocks(text: str, language: str = "python") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_snippet_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    if page.name in NEEDS:
        module, extra = NEEDS[page.name]
        pytest.importorskip(module, reason=f"{page.name}'s snippets need {extra}")
    text = page.read_text("utf-8")
    for name, language, index in FILES.get(page.name, []):
        (tmp_path / name).write_text(blocks(text, language)[index], encoding="utf-8")
    script = tmp_path / "snippets.py"
    script.write_text("\n\n".join(blocks(text)), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{page.relative_to(ROOT)}:\n{done.stderr[-3000:]}"


def test_pages_with_snippets_are_found() -> None:
    names = {p.name for p in PAGES}
    assert {"guide.md", "observability.md", "checkpoints.md", "langchain.md"} <= names
