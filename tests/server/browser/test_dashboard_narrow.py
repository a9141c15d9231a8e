"""The dashboard's parts of #33 item 26 in headless Chromium: at 390 px nothing is wider than the
screen (the saga list included), a compensated saga's badge is not a completed one's, a broken
chain is named by the seq the journal shows, and the chart's axis says the dates it spans."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from sagacity import Sagacity, SagaStatus

from .conftest import run_saga, sign_in

pytestmark = pytest.mark.browser

WIDTH = "() => document.documentElement.scrollWidth"


def test_at_390_px_the_saga_list_the_queue_and_a_saga_fit(
    served: tuple[str, Sagacity], browser: Any, tools: ModuleType, playwright_api: Any
) -> None:
    url, sg = served
    long_id = "a-rather-long-saga-identifier-for-a-narrow-phone-screen-0001"
    run_saga(sg, long_id, tools.transfer)
    run_saga(sg, "narrow-done", lambda: tools.srv_reserve("SKU-2", 1))
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        expect = playwright_api.expect
        sign_in(page, url)
        expect(page.locator("tr.request")).to_have_count(1)
        expect(page.locator("#queue-filters")).to_be_visible()
        assert page.evaluate(WIDTH) <= 390
        page.goto(f"{url}#/sagas")
        expect(page.locator("table.sagas tbody tr")).to_have_count(2)
        assert page.evaluate(WIDTH) <= 390
        page.goto(f"{url}#/saga/{long_id}")
        expect(page.locator("#saga-head")).to_contain_text("chain verified")
        assert page.evaluate(WIDTH) <= 390
    finally:
        context.close()


def test_a_compensated_saga_does_not_wear_a_completed_ones_badge(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    url, sg = served

    def reserve_then_fail() -> None:
        tools.srv_reserve("SKU-3", 1)
        raise RuntimeError("the agent gave up")

    assert run_saga(sg, "undone", reserve_then_fail).status is SagaStatus.COMPENSATED
    assert run_saga(sg, "done", lambda: tools.srv_reserve("SKU-4", 1)).status is SagaStatus.COMPLETED
    expect = playwright_api.expect
    sign_in(page, url)
    page.goto(f"{url}#/sagas")
    undone = page.locator('tr[data-saga="undone"] .pill').first
    done = page.locator('tr[data-saga="done"] .pill').first
    expect(undone).to_have_text("COMPENSATED")
    expect(done).to_have_text("COMPLETED")
    style = "el => { const s = getComputedStyle(el); return [s.backgroundColor, s.color]; }"
    assert undone.evaluate(style) != done.evaluate(style)


def test_the_charts_axis_says_its_dates(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """The 24 hours span two dates: both ends of the axis, and each bar's title, say which."""
    url, sg = served
    run_saga(sg, "chart-1", tools.transfer)
    expect = playwright_api.expect
    sign_in(page, url)
    stamp = r"(\d{4}-\d\d-\d\d) \d\d:\d\d UTC"
    start = page.locator("#activity svg.chart text.tick.from")
    end = page.locator("#activity svg.chart text.tick.until")
    expect(start).to_have_text(re.compile(rf"^{stamp}$"))
    expect(end).to_have_text(re.compile(rf"^now, {stamp}$"))
    now = datetime.now(UTC)
    days = {(now - timedelta(hours=h)).strftime("%Y-%m-%d") for h in (0, 24, 25)}  # a midnight between
    first = re.match(stamp, start.text_content() or "")
    last = re.search(stamp, end.text_content() or "")
    assert first is not None
    assert last is not None
    assert {first.group(1), last.group(1)} <= days
    assert first.group(1) != last.group(1)  # a day ago is another date
    title = page.locator("#activity g.bucket title").first.text_content() or ""
    assert title.startswith(first.group(1))
