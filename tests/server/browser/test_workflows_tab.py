"""The dashboard's Workflows tab in headless Chromium: the runs, a run's stage flow, and a gate
approved (or rejected) with the exact input shown, through the workflow routes."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity import Phase, Sagacity
from sagacity.tools import registry

from .conftest import off_loop, sign_in

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
    import os

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
    expect(page.locator("#notice")).to_contain_text("the run is compensated")
    expect(page.locator('section.stage-card[data-stage="draft"]')).to_contain_text("COMPENSATED")
    assert effects() == ["draft", "format", "unformat", "discard_draft"]
