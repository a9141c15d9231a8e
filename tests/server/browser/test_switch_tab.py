"""The dashboard's kill-switch tab in headless Chromium: an admin halts one tool after the
confirmation that spells out the change, the setting is journaled under the admin's name, an
auditor sees it, and the admin lifts it."""

from __future__ import annotations

from typing import Any

import pytest

from sagacity import Sagacity
from sagacity.guardrails import SWITCH_SAGA

from .conftest import ADMIN, off_loop, sign_in

pytestmark = pytest.mark.browser


def test_an_admin_halts_a_tool_and_lifts_it(
    served: tuple[str, Sagacity], page: Any, playwright_api: Any
) -> None:
    url, sg = served
    expect = playwright_api.expect
    sign_in(page, url, ADMIN)
    page.click('[data-nav="switch"]')
    expect(page.locator("#switch-off")).to_be_visible()
    page.select_option("#switch-state", "halt")
    page.select_option("#switch-scope", "tool")
    page.fill("#switch-target", "send_wire")
    page.fill("#switch-ttl", "30")
    page.fill("#switch-reason", "incident 42")
    page.click("#switch-review")
    expect(page.locator("#switch-confirm")).to_contain_text("HALT for tool send_wire for 30m 0s")
    expect(page.locator("#switch-confirm")).to_contain_text("root@example.com")
    assert off_loop(sg.entries, SWITCH_SAGA) == []  # nothing journaled before the confirmation
    page.click("#switch-send")
    row = page.locator('tr[data-setting="tool:send_wire"]')
    expect(row).to_contain_text("HALT")
    expect(row).to_contain_text("root@example.com")
    expect(row).to_contain_text("incident 42")
    [change] = off_loop(sg.entries, SWITCH_SAGA)
    assert change.payload.startswith("approver=root@example.com")
    page.select_option("#switch-state", "lift")
    page.click("#switch-review")
    page.click("#switch-send")
    expect(page.locator("#switch-off")).to_be_visible()
    assert len(off_loop(sg.entries, SWITCH_SAGA)) == 2


def test_an_auditor_sees_the_switch_but_cannot_change_it(
    served: tuple[str, Sagacity], page: Any, playwright_api: Any
) -> None:
    url, sg = served
    off_loop(sg.kill_switch.set, "drain", by="ops@example.com", reason="deploy")
    sign_in(page, url)
    page.click('[data-nav="switch"]')
    playwright_api.expect(page.locator('tr[data-setting="global:"]')).to_contain_text("DRAIN")
    assert page.locator("#switch-form").count() == 0
