"""Render every dashboard page to a PNG (docs/img/dashboard-*.png), from a scripted journal.

python scripts/screenshots.py                  # rewrite docs/img/
python scripts/screenshots.py --out /tmp/shots # somewhere else (the browser test does this)

Runs the real app on uvicorn on a free loopback port over a memory journal, and drives Debian's
Chromium through Playwright (no `playwright install`: the system browser is used).
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from playwright.sync_api import expect, sync_playwright

from sagacity import CompensationContext, Phase, Reversibility, Sagacity, acting_as, tool
from sagacity.server import TokenAuth, create_app

DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"
TOKEN = "screenshot-token-0123456789"


@tool
def reserve_inventory(sku: str, quantity: int) -> str:
    """Hold stock for an order."""
    time.sleep(0.04)  # a call that takes a moment, so the timeline has a duration to show
    return f"reservation R-{sku}-{quantity}"


@reserve_inventory.compensation
def release_inventory(ctx: CompensationContext) -> None:
    """Give the stock back."""


@tool
def charge_card(order: str, amount: str) -> str:
    """Charge the customer."""
    return f"charge ch_{order}"


@charge_card.compensation
def refund_card(ctx: CompensationContext) -> None:
    raise RuntimeError("payment provider timed out")


@tool(reversibility=Reversibility.IRREVERSIBLE)
def send_wire_transfer(amount: str, currency: str, iban: str, reference: str) -> str:
    """Send money to a supplier; cannot be undone."""
    return f"wire W-{reference} sent"


@tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
def release_payout(amount: str, currency: str, account: str) -> str:
    """A large payout: two different people must approve it."""
    return f"payout to {account} released"


def populate(sg: Sagacity) -> None:
    """One saga in every state the dashboard shows, started for an agent's principal."""
    with acting_as("agent-7@example.com"):
        _populate(sg)


def _populate(sg: Sagacity) -> None:

    def supplier_order(order: str, amount: str) -> str:
        reserve_inventory(f"SKU-{order}", 3)
        return send_wire_transfer(amount, "EUR", "DE89 3704 0044 0532 0130 00", order)

    def failing_refund(order: str) -> None:
        charge_card(order, "49.90")
        raise RuntimeError("address validation failed")

    sg.run("order-1039", supplier_order, "1039", "1200.00")
    sg.reject("order-1039", 4, "dana@example.com", "IBAN does not match the supplier on file")
    sg.run("order-1041", supplier_order, "1041", "480.00")
    sg.approve("order-1041", 4, "alice@example.com")  # seq 4: the START, a call, the gate
    sg.resume("order-1041", 4, sg.pending_approvals("order-1041")[0].input)
    sg.run("refund-12", failing_refund, "R12")
    # A process that died mid-call leaves an INTENT with no outcome: written here as it would be.
    sg.journal.append("order-1040", "reserve_inventory", Phase.INTENT, '{"sku":"SKU-1040","quantity":1}')
    sg.run("payout-77", release_payout, "25000.00", "EUR", "ACME GmbH")
    sg.approve("payout-77", 2, "dana@example.com")
    sg.run("order-1042", supplier_order, "1042", "9800.00")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def visit(page: Any, url: str, snap: Callable[..., None]) -> None:
    """Sign in and walk every dashboard page, calling ``snap(name)`` on each."""
    page.goto(url)
    page.fill("#token", TOKEN)
    snap("login", full=False)
    page.click("#login")
    expect(page.locator("tr.request")).to_have_count(2)
    expect(page.locator("#activity svg.chart")).to_be_visible()
    snap("queue")
    page.locator("tr.request").last.click()  # a row opens to its card, read when opened
    first = page.locator("section.approval")
    expect(first).to_contain_text("matches the payload shown")
    expect(first.locator("aside.context")).to_contain_text("Earlier calls (1)")
    snap("approvals")
    page.keyboard.press("a")  # the confirmation of the selected request
    expect(page.locator("dialog.confirm")).to_contain_text("matches the payload shown")
    snap("confirm", full=False)
    page.keyboard.press("Escape")
    page.goto(url + "#/sagas")
    expect(page.locator("table.sagas tbody tr")).to_have_count(6)
    snap("sagas")
    page.goto(url + "#/saga/order-1039")
    expect(page.locator(".verification")).to_contain_text("chain verified")
    expect(page.locator("#saga-timeline tr.compensation")).to_have_count(1)
    snap("saga")
    page.set_viewport_size({"width": 420, "height": 860})
    page.goto(url + "#/approvals")
    expect(page.locator("tr.request")).to_have_count(2)
    expect(page.locator("aside.context")).to_contain_text("Earlier calls (1)")  # still open
    snap("narrow")
    page.set_viewport_size({"width": 1280, "height": 860})
    page.goto(url + "#/saga/order-1040")
    expect(page.locator(".timeline li.in-doubt")).to_have_count(1)
    snap("saga-in-doubt")


def shoot(out: Path, chromium: str) -> list[Path]:
    """Serve a populated journal and screenshot each page into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    sg = Sagacity("memory://")
    populate(sg)
    auth = TokenAuth({TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]}})
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(sg, auth=auth), port=port, log_level="warning", lifespan="off", ws="none")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit("uvicorn did not start")
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}/sagacity/ui/"
    made: list[Path] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page: Any = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(15_000)

            def snap(name: str, full: bool = True) -> None:
                path = out / f"dashboard-{name}.png"
                page.screenshot(path=str(path), full_page=full)
                made.append(path)

            visit(page, url, snap)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sg.close()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DOCS_IMG, help="where to write the PNGs")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium executable")
    args = parser.parse_args()
    for path in shoot(args.out, args.chromium):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
