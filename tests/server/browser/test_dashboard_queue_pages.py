"""Every pending request is reachable in the dashboard (#33 item 22), in headless Chromium with 500
pending: the server sorts and pages the whole queue, filters by tool, saga prefix, requester and
"needs me", and the header's count matches what can be reached. An approver-only user, who has no
saga lookup, reaches the newest requests (two four-eyes payouts and a doomed call) this way."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from sagacity import Sagacity, acting_as

from .conftest import APPROVER_ONLY, off_loop, sign_in

pytestmark = pytest.mark.browser

BULK = 497


def _fill(sg: Sagacity, tools: ModuleType) -> None:
    """497 wires, each approved by alice (ready to resume: nobody else's approval is wanted), then
    the newest three: two four-eyes payouts that carol asked for and a call that will fail."""
    for i in range(BULK):
        result = sg.run(f"bulk-{i:03d}", tools.transfer, amount=f"{i}.00")
        sg.approve(f"bulk-{i:03d}", result.awaiting[0].journal_seq, "alice@example.com")
    with acting_as("carol@example.com"):
        sg.run("payout-a", tools.four_eyes, "70000.00")
        sg.run("payout-b", tools.four_eyes, "80000.00")
    sg.run("late-1", tools.doomed)


def shown(page: Any) -> list[str]:
    ids: list[str] = page.locator("tr.request").evaluate_all("rows => rows.map(r => r.dataset.saga)")
    return ids


def test_500_pending_are_all_reachable_sorted_filtered_and_counted(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    url, sg = served
    off_loop(_fill, sg, tools)
    expect = playwright_api.expect
    sign_in(page, url, APPROVER_ONLY)
    count = page.locator("#approvals-count")
    rows = page.locator("tr.request")
    expect(count).to_have_text("(1\N{EN DASH}50 of 500)")
    expect(rows).to_have_count(50)
    assert shown(page)[0] == "bulk-000"

    # Paging: ten pages of 50 cover the queue once; the last holds the three newest.
    seen = shown(page)
    for number in range(2, 11):
        page.click("#page-next")
        expect(page.locator("#page-range")).to_have_text(f"page {number} of 10")
        expect(rows.first).not_to_have_attribute("data-saga", seen[-50])
        seen += shown(page)
    expect(count).to_have_text("(451\N{EN DASH}500 of 500)")
    expect(page.locator("#page-next")).to_be_disabled()
    assert len(seen) == len(set(seen)) == 500
    assert seen[-3:] == ["payout-a", "payout-b", "late-1"]
    page.click("#page-prev")
    expect(count).to_have_text("(401\N{EN DASH}450 of 500)")

    # Sorting orders the whole queue and starts again at its first page: the saga ids in
    # reverse put the three newest first, which no page of the 50 oldest holds.
    page.click('th[data-sort="saga"] button')
    expect(page.locator('th[data-sort="saga"]')).to_have_attribute("aria-sort", "ascending")
    expect(count).to_have_text("(1\N{EN DASH}50 of 500)")
    page.click('th[data-sort="saga"] button')
    expect(rows.first).to_have_attribute("data-saga", "payout-b")
    assert shown(page)[:4] == ["payout-b", "payout-a", "late-1", "bulk-496"]
    page.click('th[data-sort="waiting"] button')  # back to the longest waiting first
    expect(rows.first).to_have_attribute("data-saga", "bulk-000")

    # Filters: each narrows the whole queue, and the count says how many match.
    page.fill("#filter-tool", "srv_payout")
    page.press("#filter-tool", "Enter")
    expect(count).to_have_text("(2 matching)")
    assert shown(page) == ["payout-a", "payout-b"]
    expect(page.locator('tr.request[data-saga="payout-a"] td.approvals-count')).to_have_text("0/2")
    page.click("#filter-clear")
    expect(count).to_have_text("(1\N{EN DASH}50 of 500)")
    page.fill("#filter-prefix", "late")
    page.press("#filter-prefix", "Enter")
    expect(count).to_have_text("(1 matching)")
    assert shown(page) == ["late-1"]
    page.click("#filter-clear")
    page.fill("#filter-requester", "carol@example.com")
    page.press("#filter-requester", "Enter")
    expect(count).to_have_text("(2 matching)")
    assert shown(page) == ["payout-a", "payout-b"]
    page.click("#filter-clear")
    page.check("#filter-needs-me")  # bob's approval is wanted by the three alice has not approved
    expect(count).to_have_text("(3 matching)")
    assert shown(page) == ["payout-a", "payout-b", "late-1"]
    page.fill("#filter-prefix", "nothing-")
    page.press("#filter-prefix", "Enter")
    expect(page.locator(".empty")).to_have_text("No pending request matches these filters.")
    expect(count).to_have_text("(0 matching)")

    # The filters last for the tab, as the order does.
    page.reload()
    expect(page.locator(".empty")).to_have_text("No pending request matches these filters.")
    expect(page.locator("#filter-needs-me")).to_be_checked()
