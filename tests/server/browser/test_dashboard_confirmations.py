"""The dashboard's confirmations (#25): a rejection needs a reason and says what it will undo;
resume is confirmed like approve."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from sagacity import Reversibility, Sagacity, tool

from .conftest import off_loop, open_request, run_saga, serve, sign_in

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("typed", ["", "   "])
def test_enter_on_an_empty_reason_journals_nothing(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any, typed: str
) -> None:
    """Enter in an empty (or blank) reason field says a reason is required; nothing is sent."""
    url, sg = served
    run_saga(sg, "wire-r", tools.transfer, amount="7.00")
    before = len(off_loop(sg.entries, "wire-r"))
    sign_in(page, url)
    open_request(page, "wire-r").locator("button.reject").click()
    reason = page.locator("#confirm-reason")
    reason.fill(typed)
    reason.press("Enter")
    expect = playwright_api.expect
    expect(page.locator("#confirm-error")).to_have_text("A reason is required: say why, in one line.")
    expect(page.locator("dialog.confirm")).to_be_visible()
    expect(reason).to_be_focused()
    assert len(off_loop(sg.entries, "wire-r")) == before
    assert len(off_loop(sg.pending_approvals, "wire-r")) == 1
    reason.fill("wrong beneficiary")
    reason.press("Enter")
    expect(page.locator(".saga-status")).to_contain_text("REJECTED")


def test_the_reject_dialog_lists_what_it_will_undo_in_order(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """Before the human confirms, the dialog names each compensation, in the order it will run,
    with the input of the call it undoes."""
    url, sg = served

    def two_steps() -> str:
        tools.srv_reserve("SKU-A", 1)
        tools.srv_reserve("SKU-B", 2)
        return tools.srv_wire("9.00", "ACME")

    run_saga(sg, "undo-1", two_steps)
    sign_in(page, url)
    open_request(page, "undo-1").locator("button.reject").click()
    expect = playwright_api.expect
    steps = page.locator("#confirm-undo li")
    expect(steps).to_have_count(2)
    expect(page.locator(".undo-box p")).to_have_text(
        "This rejection will run 2 compensations, in this order:"
    )
    expect(steps.nth(0)).to_contain_text("undoes srv_reserve (seq 5)")  # after the saga's START
    expect(steps.nth(0)).to_contain_text('"sku":"SKU-B"')
    expect(steps.nth(1)).to_contain_text("undoes srv_reserve (seq 3)")
    expect(steps.nth(1)).to_contain_text('"sku":"SKU-A"')
    expect(steps.nth(0).locator("strong")).to_have_text("srv_release")
    page.locator("#confirm-cancel").click()
    assert len(off_loop(sg.pending_approvals, "undo-1")) == 1  # cancelling decided nothing


def test_resume_asks_for_confirmation_like_approve(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """Resume opens a confirmation with the payload and its hash; Cancel runs nothing, confirming runs it."""
    url, sg = served
    result = run_saga(sg, "res-1", tools.transfer, amount="3.00")
    seq = result.awaiting[0].journal_seq
    off_loop(sg.approve, "res-1", seq, "carol@example.com")
    sign_in(page, url)
    expect = playwright_api.expect
    resume = open_request(page, "res-1").locator("button.resume")
    resume.click()
    dialog = page.locator('dialog.confirm[data-kind="resume"]')
    expect(dialog).to_be_visible()
    expect(dialog.locator("#confirm-payload")).to_contain_text('"amount": "3.00"')
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert "wired 3.00 to ACME" not in tools.EFFECTS
    resume.click()
    page.locator("#confirm-ok").click()
    expect(page.locator("#notice")).to_contain_text("Resumed: saga res-1 is COMPLETED")
    assert tools.EFFECTS.count("wired 3.00 to ACME") == 1


def test_the_notice_does_not_survive_navigation_by_url(
    served: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """The success line belongs to the page the action opened; typing another URL clears it."""
    url, sg = served
    run_saga(sg, "note-1", tools.transfer, amount="4.00")
    sign_in(page, url)
    open_request(page, "note-1").locator("button.reject").click()
    page.locator("#confirm-reason").fill("not ours")
    page.locator("#confirm-ok").click()
    expect = playwright_api.expect
    expect(page.locator("#notice")).to_contain_text("Rejected by alice@example.com")
    page.goto(url + "#/sagas")
    expect(page.locator("#saga-rows")).to_contain_text("note-1")
    expect(page.locator("#notice")).to_be_hidden()
    page.go_back()
    expect(page.locator("#notice")).to_be_hidden()


@tool(reversibility=Reversibility.IRREVERSIBLE)
def ui_pay_invoice(reference: str, amount: str) -> str:
    """An irreversible payment whose amount follows a reference of any length."""
    return f"paid {amount} for {reference}"


def test_at_420_px_the_header_fits_and_amounts_stay_whole(
    served: tuple[str, Sagacity], browser: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """At 420 px nothing is wider than the window, and an amount is never split across lines:
    references of every length up to two lines put the amount at every place in a line."""
    url, sg = served
    for n in range(1, 61):
        run_saga(sg, f"narrow-{n:02d}", lambda n=n: ui_pay_invoice("R" * n, "4200.00"))
    context = browser.new_context(viewport={"width": 420, "height": 900})
    try:
        page = context.new_page()
        sign_in(page, url)
        playwright_api.expect(page.locator("tr.request")).to_have_count(50)
        page.click("#expand-all")  # every row opened to its card
        playwright_api.expect(page.locator("section.approval")).to_have_count(50)
        playwright_api.expect(page.locator("aside.context .principal")).to_have_count(50)
        widths = page.evaluate(
            "() => [document.documentElement.scrollWidth, document.querySelector('header.top').scrollWidth,"
            " document.querySelector('header.top').clientWidth]"
        )
        assert widths[0] <= 420, widths
        assert widths[1] <= widths[2], widths
        page.evaluate(
            "() => document.querySelectorAll('section.approval details').forEach((d) => { d.open = true; })"
        )
        split = page.evaluate(
            """() => Array.from(document.querySelectorAll('section.approval :is(pre.payload, pre.exact)'))
              .filter((pre) => {
              const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
              let node = walk.nextNode();
              while (node && !node.textContent.includes('4200.00')) node = walk.nextNode();
              const at = node.textContent.indexOf('4200.00');
              const range = document.createRange();
              range.setStart(node, at); range.setEnd(node, at + 7);
              return new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top))).size > 1;
            }).length"""
        )
        assert split == 0  # no amount broken mid-number, in the payload or the exact bytes
        exact = page.evaluate("() => document.querySelector('section.approval pre.exact').textContent")
        assert exact.startswith('{"reference":"R')  # the exact bytes, <wbr> added no character
        assert exact.endswith('","amount":"4200.00"}')
    finally:
        context.close()


@pytest.fixture
def insecure_url(tools: ModuleType) -> Iterator[tuple[str, Sagacity]]:
    """The app served WITHOUT authentication (the insecure flag), on a free loopback port."""
    sg = Sagacity("memory://")
    for url in serve(sg, insecure_no_auth_i_know_what_i_am_doing=True):
        yield url, sg


def test_insecure_mode_opens_without_the_sign_in_page(
    insecure_url: tuple[str, Sagacity], page: Any, tools: ModuleType, playwright_api: Any
) -> None:
    """A server without authentication does not ask for a token it would not check: the
    dashboard opens, under its red banner, with nothing to sign out of."""
    url, sg = insecure_url
    run_saga(sg, "open-1", tools.transfer)
    page.goto(url)
    expect = playwright_api.expect
    expect(page.locator('tr.request[data-saga="open-1"]')).to_be_visible()
    expect(page.locator("#token")).to_have_count(0)
    expect(page.locator("#banner")).to_contain_text("WITHOUT AUTHENTICATION")
    expect(page.locator("#logout")).to_be_hidden()
