"""`sagacity workflows`: the same runs, views and decisions as the library, from a shell."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType

from click.testing import CliRunner

from sagacity import Phase, Sagacity
from sagacity.cli import main

BRIEF = {"topic": "sagas for agents"}


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["workflows", *args, "--import", "wf_app"], catch_exceptions=False)
    return result.exit_code, result.output


def test_list_show_approve_and_continue(wf: ModuleType, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    with Sagacity(url) as sg:
        wf.publishing.run(sg, "article-1", BRIEF)
    code, out = cli("list", "--db", url)
    assert code == 0
    assert "article-1" in out
    assert "AWAITING_APPROVAL" in out
    code, out = cli("show", "article-1", "--json", "--db", url)
    assert code == 0
    assert json.loads(out)["stages"][2]["gate"]["approvalsRequired"] == 1
    code, out = cli(
        "approve", "article-1", "publish", "--as", "lawyer@example.com", "--continue", "--db", url
    )
    assert code == 0, out
    assert "COMPLETED" in out
    with Sagacity(url) as sg:
        approved = [e.payload for e in sg.entries("article-1") if e.phase == Phase.APPROVED]
    assert approved == ["approver=lawyer@example.com"]
    lines = Path(os.environ["SAGACITY_WF_EFFECTS"]).read_text().splitlines()
    assert [json.loads(line)[0] for line in lines] == ["draft", "format", "publish"]


def test_reject_needs_a_reason_and_resume_reports_compensation(wf: ModuleType, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    with Sagacity(url) as sg:
        wf.publishing.run(sg, "article-2", BRIEF)
    code, out = cli(
        "reject", "article-2", "publish", "--as", "lawyer@example.com", "--reason", " ", "--db", url
    )
    assert code == 2
    assert "nothing was journaled" in out
    code, out = cli(
        "reject", "article-2", "publish", "--as", "lawyer@example.com", "--reason", "no", "--db", url
    )
    assert code == 0
    assert "REJECTED" in out
    code, out = cli("resume", "article-2", "--db", url)
    assert code == 1  # the run compensated: exit 1, as documented
    assert "COMPENSATED" in out
    code, out = cli("show", "no-such-run", "--db", url)
    assert code == 2
    assert "no-such-run" in out
