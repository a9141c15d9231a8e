"""The dashboard's confirmations (#25): a rejection needs a reason and says what it will undo;
resume is confirmed like approve."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from sagacity import Sagacity

from .conftest import off_loop, run_saga, sign_in

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
    page.locator('section.approval[data-saga="wire-r"] button.reject').click()
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
    expect(page.locator(".saga-status")).to_contain_text("COMPENSATED")
