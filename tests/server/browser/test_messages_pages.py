"""In Chromium: the email link's confirmation page (opening it decides nothing, confirming does,
once) and the dashboard's queue under approver scopes (each approver sees what is theirs)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity import Sagacity
from sagacity._links import email_link
from sagacity.guardrails import parse_policy
from sagacity.server import TokenAuth
from sagacity.server.messages import Messages

from .conftest import APPROVER_ONLY, TOKEN, off_loop, run_saga, serve, sign_in

SECRET = "browser-link-secret-0123456789abcdef"
POLICY = """
[groups]
finance = ["alice@example.com"]

[approvers]
srv_wire = ["group:finance"]
"""


@pytest.fixture
def scoped(tools: ModuleType, tmp_path: Path) -> Iterator[tuple[str, Sagacity]]:
    """The app on uvicorn with email links on and the policy above (alice is in finance, bob is not)."""
    sg = Sagacity(f"sqlite:///{tmp_path}/journal.db", policy=parse_policy(POLICY))
    auth = TokenAuth(
        {
            TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]},
            APPROVER_ONLY: {"name": "bob@example.com", "roles": ["approver"]},
        }
    )
    for url in serve(sg, auth=auth, messages=Messages(link_secret=SECRET)):
        yield url, sg


def _decisions(sg: Sagacity, saga_id: str) -> list[str]:
    return [e.payload for e in off_loop(sg.entries, saga_id) if str(e.phase) in {"APPROVED", "REJECTED"}]


def test_email_link_page_shows_the_payload_and_decides_only_on_confirmation(
    scoped: tuple[str, Sagacity], page: Any, tools: ModuleType
) -> None:
    """The page shows the exact payload and its SHA-256; loading it journals nothing; typing
    another identity is refused; alice's confirmation journals via=email; reloading the used
    link says so."""
    url, sg = scoped
    [request] = run_saga(sg, "mail-b", tools.transfer, amount="250.00").awaiting
    base = url.removesuffix("/ui/")
    mine = email_link(
        base, SECRET, approver="alice@example.com", saga_id="mail-b", seq=request.journal_seq,
        sha256=request.input_hash, ttl=timedelta(hours=1),
    )  # fmt: skip
    page.goto(mine)
    assert '"amount": "250.00"' in page.inner_text("#payload")
    assert page.inner_text("#sha256") == request.input_hash
    assert page.inner_text("#approver") == "alice@example.com"
    assert _decisions(sg, "mail-b") == []

    page.fill("#identity", "mallory@example.com")
    page.click("#approve")
    assert page.inner_text("h1") == "Not your link"
    assert _decisions(sg, "mail-b") == []

    page.goto(mine)
    page.fill("#identity", "alice@example.com")
    page.click("#approve")
    assert page.inner_text("h1") == "Decided"
    assert page.inner_text("#outcome").startswith("Approved by alice@example.com")
    assert _decisions(sg, "mail-b") == ["approver=alice@example.com\nvia=email"]
    page.goto(mine)
    assert page.inner_text("h1") == "Link used"


def test_the_queue_shows_each_approver_what_is_theirs(
    scoped: tuple[str, Sagacity], page: Any, tools: ModuleType
) -> None:
    """bob, outside group:finance, sees the wire request marked not his, its buttons disabled,
    and "Needs me" leaves it out; alice sees it as hers and can approve it."""
    url, sg = scoped
    run_saga(sg, "scoped-b", tools.transfer)
    sign_in(page, url, APPROVER_ONLY)
    row = page.locator('tr.request[data-saga="scoped-b"]')
    row.wait_for()
    row.locator("button.toggle").click()
    card = page.locator('section.approval[data-saga="scoped-b"]')
    assert "not yours to decide" in card.locator(".approver-scope").inner_text()
    assert card.locator("button.approve").is_disabled()
    assert card.locator("button.reject").is_disabled()
    assert "group:finance" in (card.locator("button.approve").get_attribute("title") or "")
    page.check("#filter-needs-me")
    page.locator('tr.request[data-saga="scoped-b"]').wait_for(state="detached")

    context = page.context.browser.new_context()
    alice = context.new_page()
    try:
        sign_in(alice, url, TOKEN)
        alice.locator('tr.request[data-saga="scoped-b"] button.toggle').click()
        mine = alice.locator('section.approval[data-saga="scoped-b"]')
        assert "yours to decide" in mine.locator(".approver-scope").inner_text()
        assert mine.locator("button.approve").is_enabled()
    finally:
        context.close()
