"""The dashboard's conveniences (#25) in headless Chromium: the compact sortable queue, the tool's
docstring and the saga's context beside a request, copy buttons, a saga's timeline, the chart of
decisions and pending approvals, and all of it at 420 px."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from sagacity import Phase, Reversibility, Sagacity, acting_as, tool
from sagacity.tools import registry

from .conftest import off_loop, open_request, run_saga, sign_in

pytestmark = pytest.mark.browser

REFRESH_SECONDS = 5  # the dashboard's refresh period (app.js REFRESH_MS)


def order(page: Any) -> list[str]:
    ids: list[str] = page.locator("tr.request").evaluate_all("rows => rows.map(r => r.dataset.saga)")
    return ids


def order_is(page: Any, ids: list[str]) -> None:
    """Wait until the queue's rows are ``ids``, in order (the server answers a new order)."""
    page.wait_for_function(
        "ids => JSON.stringify(Array.from(document.querySelectorAll('tr.request'), r => r.dataset.saga))"
        " === JSON.stringify(ids)",
        arg=ids,
    )


def test_the_queue_is_one_line_per_request_sorted_by_click_or_key(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """Each request is one row (saga, tool, waiting, approvals n/m, expires); a header click sorts
    by it (on the server, over the whole queue) and a second click reverses; s / S do the same
    from the keyboard, Enter on a header button too; the order lasts for the tab (a reload keeps it)."""
    url, sg = served
    run_saga(sg, "zeta-1", tools.transfer)
    payout = run_saga(sg, "alpha-1", tools.four_eyes).awaiting[0].journal_seq
    run_saga(sg, "mid-1", tools.transfer, amount="5.00")
    off_loop(sg.approve, "alpha-1", payout, "bob@example.com")
    expect = playwright_api.expect
    sign_in(page, url)
    rows = page.locator("tr.request")
    expect(rows).to_have_count(3)
    assert order(page) == ["zeta-1", "alpha-1", "mid-1"]  # the longest waiting first
    alpha = page.locator('tr.request[data-saga="alpha-1"]')
    expect(alpha.locator("td").nth(1)).to_have_text("srv_payout")
    expect(alpha.locator("td.approvals-count")).to_have_text("1/2")
    expect(alpha.locator(".left")).to_have_text(re.compile(r"^in 23h \d+m$"))  # the default TTL, 24 h
    expect(page.locator('tr.request[data-saga="zeta-1"] td.approvals-count')).to_have_text("0/1")
    expect(page.locator('th[data-sort="waiting"]')).to_have_attribute("aria-sort", "descending")

    page.click('th[data-sort="saga"] button')
    expect(page.locator('th[data-sort="saga"]')).to_have_attribute("aria-sort", "ascending")
    order_is(page, ["alpha-1", "mid-1", "zeta-1"])
    page.click('th[data-sort="saga"] button')
    expect(page.locator('th[data-sort="saga"]')).to_have_attribute("aria-sort", "descending")
    order_is(page, ["zeta-1", "mid-1", "alpha-1"])
    # The server sorts the whole queue; it cannot by approvals (they are in each saga's journal).
    expect(page.locator('th[data-col="approvals"] button')).to_have_count(0)

    page.locator("h1").click()  # nothing focused: shortcuts apply
    page.keyboard.press("s")  # the next sortable column: tool, A to Z
    expect(page.locator('th[data-sort="tool"]')).to_have_attribute("aria-sort", "ascending")
    page.keyboard.press("s")  # waiting, the longest first
    expect(page.locator('th[data-sort="waiting"]')).to_have_attribute("aria-sort", "descending")
    page.keyboard.press("s")  # expires, soonest first
    expect(page.locator('th[data-sort="expires"]')).to_have_attribute("aria-sort", "ascending")
    page.keyboard.press("s")  # and round to the first column
    expect(page.locator('th[data-sort="saga"]')).to_have_attribute("aria-sort", "ascending")
    order_is(page, ["alpha-1", "mid-1", "zeta-1"])
    page.keyboard.press("S")
    expect(page.locator('th[data-sort="saga"]')).to_have_attribute("aria-sort", "descending")
    order_is(page, ["zeta-1", "mid-1", "alpha-1"])
    page.locator('th[data-sort="tool"] button').focus()
    page.keyboard.press("Enter")
    expect(page.locator('th[data-sort="tool"]')).to_have_attribute("aria-sort", "ascending")
    order_is(page, ["alpha-1", "zeta-1", "mid-1"])  # srv_payout before srv_wire, then the oldest first
    page.reload()
    expect(rows).to_have_count(3)
    expect(page.locator('th[data-sort="tool"]')).to_have_attribute("aria-sort", "ascending")


def test_a_row_opens_to_the_exact_request_by_click_or_key(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """A click on a row, or Enter (and o) on the selected one, opens it to the request's card:
    the exact input bytes, the hash, approve and reject; again closes it. Opening reads the
    request's detail once; an open row stays open across refreshes."""
    url, sg = served
    run_saga(sg, "wire-a", tools.transfer, amount="1.00")
    run_saga(sg, "wire-b", tools.transfer, amount="2222.22", to="Zoë & Co")
    (request_b,) = off_loop(sg.pending_approvals, "wire-b")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    expect = playwright_api.expect
    sign_in(page, url)
    expect(page.locator("tr.request")).to_have_count(2)
    expect(page.locator("section.approval")).to_have_count(0)  # one line each, nothing open
    page.keyboard.press("j")
    row_b = page.locator('tr.request[data-saga="wire-b"]')
    expect(row_b).to_be_focused()
    page.keyboard.press("Enter")
    expect(row_b).to_have_attribute("aria-expanded", "true")
    card = page.locator('section.approval[data-saga="wire-b"]')
    expect(card.locator("aside.context .principal")).to_be_visible()
    assert card.locator("pre.exact").text_content() == request_b.input  # byte for byte
    expect(card.locator("code.hash")).to_have_text(request_b.input_hash)
    expect(card).to_contain_text("matches the payload shown")
    expect(row_b).to_be_focused()
    page.keyboard.press("Enter")
    expect(row_b).to_have_attribute("aria-expanded", "false")
    expect(card).to_have_count(0)
    page.keyboard.press("o")
    expect(row_b).to_have_attribute("aria-expanded", "true")
    page.locator('tr.request[data-saga="wire-a"] td').nth(1).click()
    expect(page.locator('section.approval[data-saga="wire-a"]')).to_be_visible()
    page.wait_for_timeout(2 * REFRESH_SECONDS * 1000)  # refreshes come due: open rows stay open
    expect(page.locator("section.approval")).to_have_count(2)
    api = url.removesuffix("ui/")
    reads = [u for u in asked if u.startswith(api + "requests/wire-b/")]
    assert reads == [f"{api}requests/wire-b/{request_b.journal_seq}"]  # opened twice, unchanged: read once
    page.keyboard.press("r")  # r on the selected row: the rejection's confirmation
    expect(page.locator('dialog.confirm[data-kind="reject"]')).to_be_visible()
    page.keyboard.press("Escape")
    assert not [e for e in off_loop(sg.entries, "wire-a") if e.phase == Phase.REJECTED]


@tool(reversibility=Reversibility.IRREVERSIBLE)
def ui_mystery(note: str) -> str:
    """Not to be seen: the server forgets it before the dashboard asks."""
    return note


def test_beside_a_request_the_tools_docstring_and_the_sagas_context(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """An open request shows what the tool does (its docstring, as the serving process registered
    it) and the saga's context: its principal, start time and the calls before the request; a
    tool the server has not registered is said to be unknown, not shown as blank."""
    url, sg = served

    def started_for_an_agent() -> None:
        with acting_as("agent-7@example.com"):
            sg.run("ctx-1", tools.transfer)

    off_loop(started_for_an_agent)
    run_saga(sg, "ctx-2", lambda: ui_mystery("hello"))
    spec = registry.find("ui_mystery")
    assert spec is not None
    registry.unregister("ui_mystery")
    try:
        expect = playwright_api.expect
        sign_in(page, url)
        context = open_request(page, "ctx-1").locator("aside.context")
        expect(context.locator(".doc")).to_have_text("Send money; cannot be undone, so it waits for a human.")
        expect(context.locator(".principal")).to_have_text("agent-7@example.com")
        started = off_loop(sg.entries, "ctx-1")[0].timestamp
        expect(context.locator(".started")).to_have_text(started.strftime("%Y-%m-%d %H:%M:%S UTC"))
        calls = context.locator("ol.earlier-calls li")
        expect(calls).to_have_count(1)
        expect(calls.first).to_contain_text("srv_reserve")
        expect(calls.first).to_contain_text("EXECUTED")
        expect(calls.first).to_contain_text("took ")
        expect(calls.first.locator("code")).to_have_text('{"sku":"SKU-1","quantity":1}')
        unknown = open_request(page, "ctx-2").locator("aside.context .doc")
        expect(unknown).to_have_class("doc unknown")
        expect(unknown).to_contain_text("Unknown: this server has not registered ui_mystery")
        expect(page.locator('section.approval[data-saga="ctx-2"] aside.context')).to_contain_text(
            "None: this request is the saga's first call."
        )
    finally:
        registry.register(spec)


def clipboard(page: Any) -> str:
    text: str = page.evaluate("() => navigator.clipboard.readText()")
    return text


def test_copy_buttons_copy_ids_and_hashes(
    served: tuple[str, Sagacity], browser: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """Copy puts exactly the saga id, the input hash or an entry's hash on the clipboard (read
    back through the Clipboard API, permission granted to the page)."""
    url, sg = served
    run_saga(sg, "copy-1", tools.transfer)
    (request,) = off_loop(sg.pending_approvals, "copy-1")
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    try:
        page = context.new_page()
        expect = playwright_api.expect
        sign_in(page, url)
        row = page.locator('tr.request[data-saga="copy-1"]')
        row.locator('button.copy[data-copy="saga id"]').click()
        expect(row.locator("button.copy")).to_have_text("Copied")
        assert clipboard(page) == "copy-1"
        expect(row).to_have_attribute("aria-expanded", "false")  # a copy does not open the row
        card = open_request(page, "copy-1")
        card.locator('button.copy[data-copy="input hash"]').click()
        assert clipboard(page) == request.input_hash
        page.goto(f"{url}#/saga/copy-1")
        entries = off_loop(sg.entries, "copy-1")
        gate = next(e for e in entries if e.phase == Phase.AWAITING_APPROVAL)
        page.locator(f'.timeline li[data-seq="{gate.seq}"] button.copy').click()
        assert clipboard(page) == gate.hash
        page.locator('#saga-head button.copy[data-copy="saga id"]').click()
        assert clipboard(page) == "copy-1"
    finally:
        context.close()


def test_copy_falls_back_where_the_clipboard_api_is_missing(
    served: tuple[str, Sagacity], browser: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """Without navigator.clipboard.writeText (an older browser) Copy still copies, through a
    selected field and execCommand, also from inside the modal confirmation."""
    url, sg = served
    run_saga(sg, "copy-2", tools.transfer)
    (request,) = off_loop(sg.pending_approvals, "copy-2")
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    context.add_init_script("delete Clipboard.prototype.writeText;")
    try:
        page = context.new_page()
        expect = playwright_api.expect
        sign_in(page, url)
        assert page.evaluate("() => typeof navigator.clipboard.writeText") == "undefined"
        row = page.locator('tr.request[data-saga="copy-2"]')
        row.locator('button.copy[data-copy="saga id"]').click()
        expect(row.locator("button.copy")).to_have_text("Copied")
        assert clipboard(page) == "copy-2"
        open_request(page, "copy-2").locator("button.approve").click()
        dialog = page.locator("dialog.confirm")
        dialog.locator('button.copy[data-copy="input hash"]').click()
        expect(dialog.locator("button.copy")).to_have_text("Copied")
        assert clipboard(page) == request.input_hash
        assert page.locator("textarea.copy-buffer").count() == 0  # nothing left behind
    finally:
        context.close()


def millis(start: datetime, end: datetime) -> int:
    """What the browser computes from the two timestamps: milliseconds, truncated, subtracted."""
    return (
        end.replace(microsecond=end.microsecond // 1000 * 1000)
        - start.replace(microsecond=start.microsecond // 1000 * 1000)
    ) // timedelta(milliseconds=1)


def test_the_saga_page_draws_a_timeline_of_calls_decisions_and_compensations(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """Each call with when it started and how long it took (INTENT to outcome, as journaled),
    each request and decision with who decided, and the compensations a rejection ran."""
    url, sg = served
    seq = run_saga(sg, "tl-1", tools.transfer).awaiting[0].journal_seq
    off_loop(sg.approve, "tl-1", seq, "alice@example.com")
    (request,) = off_loop(sg.pending_approvals, "tl-1")
    off_loop(sg.resume, "tl-1", seq, request.input)
    rejected = run_saga(sg, "tl-2", tools.transfer).awaiting[0].journal_seq
    off_loop(sg.reject, "tl-2", rejected, "bob@example.com", "unknown beneficiary")
    expect = playwright_api.expect
    sign_in(page, url)
    page.goto(f"{url}#/saga/tl-1")
    rows = page.locator("#saga-timeline tbody tr")
    expect(rows.first).to_have_attribute("data-kind", "start")
    kinds = rows.evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds == ["start", "call", "gate", "decision", "call"]
    entries = {e.seq: e for e in off_loop(sg.entries, "tl-1")}
    reserve_intent = next(
        e for e in entries.values() if e.tool_name == "srv_reserve" and e.phase == Phase.INTENT
    )
    reserve_done = next(
        e for e in entries.values() if e.tool_name == "srv_reserve" and e.phase == Phase.EXECUTED
    )
    first_call = rows.nth(1)
    expect(first_call).to_contain_text("srv_reserve")
    expect(first_call.locator(".took")).to_have_text(
        f"{millis(reserve_intent.timestamp, reserve_done.timestamp)} ms"
    )
    decision = page.locator('#saga-timeline tr[data-kind="decision"]')
    expect(decision.locator(".tl-who")).to_have_text("alice@example.com")
    expect(decision).to_contain_text("approved srv_wire")
    expect(page.locator('#saga-timeline tr[data-kind="gate"] .took')).to_contain_text("waited ")
    expect(rows.nth(4)).to_contain_text(f"runs request #{seq}")

    page.goto(f"{url}#/saga/tl-2")
    compensation = page.locator('#saga-timeline tr[data-kind="compensation"]')
    expect(compensation).to_have_count(1)
    expect(compensation).to_contain_text("compensate srv_reserve")
    expect(compensation).to_contain_text("COMPENSATED")
    no = page.locator('#saga-timeline tr[data-kind="decision"]')
    expect(no.locator(".tl-who")).to_have_text("bob@example.com")
    expect(no.locator(".tl-reason")).to_have_text("unknown beneficiary")
    kinds = page.locator("#saga-timeline tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds == ["start", "call", "gate", "decision", "compensation"]  # the undo after the no


def test_the_chart_counts_decisions_and_pending_approvals(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """Over the queue, an SVG drawn by the page (no image fetched, no third-party origin) from
    GET /activity: this hour's approval and rejection, and the two requests still pending."""
    url, sg = served
    first = run_saga(sg, "chart-1", tools.transfer).awaiting[0].journal_seq
    run_saga(sg, "chart-2", tools.transfer)
    third = run_saga(sg, "chart-3", tools.transfer).awaiting[0].journal_seq
    off_loop(sg.approve, "chart-1", first, "bob@example.com")
    off_loop(sg.reject, "chart-3", third, "bob@example.com", "no")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    expect = playwright_api.expect
    sign_in(page, url)
    expect(page.locator("#activity-summary")).to_have_text(
        "Last 24 hours: 1 approval, 1 rejection; 2 pending now, at most 2."
    )
    buckets = page.locator("#activity svg.chart g.bucket")
    expect(buckets).to_have_count(24)
    last = buckets.nth(23)
    expect(last).to_have_attribute("data-approved", "1")
    expect(last).to_have_attribute("data-rejected", "1")
    expect(last).to_have_attribute("data-pending", "2")
    expect(last.locator("rect.approved")).to_have_count(1)
    expect(last.locator("rect.rejected")).to_have_count(1)
    expect(page.locator("#activity rect.approved")).to_have_count(1)
    expect(page.locator("#activity svg.chart")).to_have_attribute("aria-labelledby", "activity-summary")
    origin = url.split("/sagacity/")[0]
    assert all(u.startswith((origin, "data:")) for u in asked), asked
    assert not [u for u in asked if u.endswith((".png", ".svg"))]
    assert [u for u in asked if "/activity?" in u] == [f"{origin}/sagacity/activity?hours=24"]


def test_at_420_px_the_queue_an_open_request_the_chart_and_the_timeline_fit(
    served: tuple[str, Sagacity], browser: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """At 420 px nothing is wider than the window: the queue's rows, an open request with its
    context, the chart, and a saga's timeline."""
    url, sg = served
    seq = run_saga(sg, "a-rather-long-saga-identifier-for-a-narrow-screen-0001", tools.transfer).awaiting[0]
    off_loop(sg.reject, seq.saga_id, seq.journal_seq, "alice@example.com", "a reason " * 12)
    run_saga(sg, "narrow-2", tools.transfer)
    context = browser.new_context(viewport={"width": 420, "height": 900})
    try:
        page = context.new_page()
        expect = playwright_api.expect
        sign_in(page, url)
        open_request(page, "narrow-2")
        expect(page.locator("#activity svg.chart")).to_be_visible()
        width = "() => document.documentElement.scrollWidth"
        assert page.evaluate(width) <= 420
        page.goto(f"{url}#/saga/{seq.saga_id}")
        expect(page.locator('#saga-timeline tr[data-kind="compensation"]')).to_be_visible()
        assert page.evaluate(width) <= 420
    finally:
        context.close()
