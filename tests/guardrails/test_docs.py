"""docs/policies.md runs as written: its policy checks, its Python blocks run in order on it,
and the CLI answers as the page shows."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sagacity.cli import main
from sagacity.guardrails import parse_policy

DOC = Path(__file__).parent.parent.parent / "docs" / "policies.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_page_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc_namespace: Callable[[str], dict[str, Any]]
) -> None:
    monkeypatch.chdir(tmp_path)
    policy, *others = _blocks("toml")  # the payments policy, then excerpts (approver scopes)
    for excerpt in others:
        parse_policy(excerpt, source="docs/policies.md")
    Path("payments.toml").write_text(policy, encoding="utf-8")
    checked = CliRunner().invoke(main, ["policy", "check", "payments.toml"])
    assert checked.exit_code == 0, checked.output
    assert (
        "payments.toml: ok, 10 rules (4 on history, 1 in shadow mode), default allow; sha256"
        in checked.output
    )
    namespace = doc_namespace("policies_doc")
    for block in _blocks("python"):
        exec(compile(block, str(DOC), "exec"), namespace)
    assert namespace["shadowed"] == []  # every payment in the page is in EUR
    explained = CliRunner().invoke(
        main,
        [
            "policy",
            "explain",
            "payments.toml",
            "--db",
            "sqlite:///payments.db",
            "--tool",
            "refund",
            "--args",
            '{"order":"o-2","amount":"250.00"}',
            "--saga",
            "refunds-1",
            "--principal",
            "alice@example.com",
            "--irreversible",
        ],
    )
    assert explained.exit_code == 0, explained.output
    shown = next(b for b in _blocks("console") if "policy explain" in b)
    assert explained.output.split("\n")[0] == shown.split("\n")[2]
    assert "principal=alice@example.com" in explained.output
