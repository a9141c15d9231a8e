"""The dashboard's Workflows tab in headless Chromium: the runs, a run's stage flow, and a gate
approved (or rejected) with the exact input shown, through the workflow routes."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity import Phase, Sagacity
from sagacity.guardrails import build_policy, hold
from sagacity.server import TokenAuth
from sagacity.tools import registry

from .conftest import TOKEN, off_loop, serve, sign_in

pytestmark = pytest.mark.browser
WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


@pytest.fixture
def wf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The test workflow (tests/workflows/wf_app.py) declared in this process, as the server's."""
    monkeypatch.setenv("SAGACITY_WF_EFFECTS", str(tmp_path / "effects.log"))
    (tmp_path / "effects.log").touch()
    monkeypatch.syspath_prepend(str(WORKFLOWS))
    with registry.isolated():
        sys.modules.pop("wf_app", None)
        yield importlib.import_module("wf_app")
    sys.modules.pop("wf_app", None)


def effects() -> list[str]:
    return [json.loads(line)[0] for line in Path(os.environ["SAGACITY_WF_EFFECTS"]).read_text().splitlines()]


def test_a_gate_is_approved_from_the_run_view_and_the_run_completes(
    served: tuple[str, Sagacity], page: Any, wf: ModuleType, playwright_api: Any
) -> None:
    url, sg = served
    off_loop(wf.publishing.run, sg, "article-1", {"topic": "sagas for agents"})
    expect = playwright_api.expect
    sign_in(page, url)
    page.click('[data-nav="workflows"]')
    row = page.locator('tr[data-run="article-1"]')
    expect(row).to_contain_text("publish-article")
    expect(row).to_contain_text("AWAITING APPROVAL")
    expect(row.locator(".stage.current")).to_contain_text("publish")
    row.locator("a").click()
    card = page.locator('section.stage-card[data-stage="publish"]')
    expect(card.locator("pre.gate-input")).to_contain_text('"version": "1"')
    expect(card.locator("pre.gate-input")).to_contain_text('"html": "<h1>Sagas For Agents</h1>"')
    expect(card).to_contain_text("matches the payload shown")
    expect(card.locator(".gate")).to_contain_text("Legal must sign off before anything is published")
    expect(card.locator(".gate")).to_contain_text("0 of 1 approval(s)")
    expect(page.locator('section.stage-card[data-stage="publish"] .checks')).to_contain_text("no_embargo")
    card.locator("button.approve").click()
    expect(page.locator("#confirm-payload")).to_contain_text('"stage": "publish"')
    page.locator("#confirm-ok").click()
    expect(page.locator("#notice")).to_contain_text("the run is completed")
    expect(page.locator('section.stage-card[data-stage="publish"]')).to_contain_text("COMPLETED")
    approvals = [e.payload for e in off_loop(sg.entries, "article-1") if e.phase == Phase.APPROVED]
    assert approvals == ["approver=alice@example.com"]
    assert effects() == ["draft", "format", "publish"]


def test_a_gate_rejected_from_the_run_view_compensates(
    served: tuple[str, Sagacity], page: Any, wf: ModuleType, playwright_api: Any
) -> None:
    url, sg = served
    off_loop(wf.publishing.run, sg, "article-2", {"topic": "sagas for agents"})
    expect = playwright_api.expect
    sign_in(page, url)
    expect(page.locator('[data-nav="workflows"]')).to_be_visible()
    page.goto(url + "#/workflow/article-2")
    page.locator('section.stage-card[data-stage="publish"] button.reject').click()
    # Before the human confirms, the dialog lists the stages' undos the rejection runs, in order
    # (the last stage first), named as declared; the checks, with nothing to undo, are left out.
    undo = page.locator("#confirm-undo li")
    expect(undo).to_have_count(2)
    expect(undo.nth(0)).to_contain_text("unformat")
    expect(undo.nth(0)).to_contain_text("publish-article/format")
    expect(undo.nth(1)).to_contain_text("discard_draft")
    expect(undo.nth(1)).to_contain_text('"topic":"sagas for agents"')
    expect(page.locator(".undo-box")).to_contain_text("will run 2 compensations, in this order")
    assert effects() == ["draft", "format"]  # shown, not run
    page.fill("#confirm-reason", "not cleared by legal")
    page.locator("#confirm-ok").click()
    expect(page.locator("#notice")).to_contain_text("the run is rejected")
    expect(page.locator('section.stage-card[data-stage="draft"]')).to_contain_text("COMPENSATED")
    assert effects() == ["draft", "format", "unformat", "discard_draft"]


def test_a_stage_whose_process_was_killed_shows_in_doubt(
    wf: ModuleType, page: Any, playwright_api: Any, tmp_path: Path, lease_gone: Any
) -> None:
    """kill -9 mid-stage: the flow and the stage's card say IN DOUBT (never RUNNING) and why."""
    url_db = f"sqlite:///{tmp_path}/journal.db"
    brief = json.dumps({"topic": "sagas for agents", "fail_at": "hang"})
    proc = subprocess.Popen([sys.executable, str(WORKFLOWS / "wf_app.py"), url_db, "run", "article-3", brief])
    sg = Sagacity(url_db)
    served = serve(
        sg, auth=TokenAuth({TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]}})
    )
    try:
        url = next(served)
        deadline = time.monotonic() + 60
        while "format" not in effects():
            assert time.monotonic() < deadline, "the format stage never started"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        off_loop(lease_gone, sg, "article-3")
        expect = playwright_api.expect
        sign_in(page, url)
        page.click('[data-nav="workflows"]')
        row = page.locator('tr[data-run="article-3"]')
        expect(row).to_contain_text("IN DOUBT")
        expect(row.locator(".stage.current")).to_contain_text("format")
        row.locator("a").click()
        card = page.locator('section.stage-card[data-stage="format"]')
        expect(card.locator(".pill").first).to_contain_text("IN DOUBT")
        expect(card.locator(".in-doubt")).to_contain_text("died before journaling an outcome")
        expect(page.locator('section.stage-card[data-stage="draft"]')).to_contain_text("COMPLETED")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        served.close()


def test_a_gate_held_by_the_policy_shows_the_rule_and_its_approvers(
    wf: ModuleType, page: Any, playwright_api: Any
) -> None:
    """A policy rule holding the gate for two lawyers: the card names the rule and counts 0 of 2."""
    rules = build_policy(
        hold("legal-two", tool="publish-article/publish", approvals=2, reason="two lawyers sign off"),
        default="allow",
    )
    sg = Sagacity("memory://", policy=rules)
    off_loop(wf.publishing.run, sg, "article-4", {"topic": "sagas for agents"})
    served = serve(
        sg, auth=TokenAuth({TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]}})
    )
    try:
        url = next(served)
        expect = playwright_api.expect
        sign_in(page, url)
        expect(page.locator('[data-nav="workflows"]')).to_be_visible()  # signed in
        page.goto(url + "#/workflow/article-4")
        card = page.locator('section.stage-card[data-stage="publish"]')
        expect(card.locator(".policy")).to_contain_text(
            "hold by rule legal-two (2 approval(s)) · two lawyers sign off"
        )
        expect(card.locator(".gate")).to_contain_text("0 of 2 approval(s)")
        card.locator("button.approve").click()
        page.locator("#confirm-ok").click()
        expect(page.locator("#notice")).to_contain_text("the run is awaiting approval")  # one of two
        expect(card.locator(".gate")).to_contain_text("1 of 2 approval(s) (alice@example.com)")
    finally:
        served.close()
    assert effects() == ["draft", "format"]
